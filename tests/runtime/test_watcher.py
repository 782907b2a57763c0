"""The process's one run watcher (runtime/runs/watcher.py): one thread for every run the
process executes, one query per poll for all of them (plus one heartbeat UPDATE a second),
and an abort seen through the database flag alone still stops the run it names."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime.models import AgentRun, RunStatus
from runtime.runs import lifecycle
from runtime.runs.process import this_process
from runtime.runs.prompts import run_abort, session_prompt
from runtime.runs.watcher import RunWatcher
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def watcher_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "neta-run-watcher" or t.name.endswith("-watch")]


def test_three_runs_share_one_watcher_and_the_flag_stops_only_its_run(driver_for):
    slow = {"reply": [{"text": "word " * 60, "delay_ms": 20, "chunk_size": 5}]}
    drivers = [driver_for(rules(default=slow), name=f"watched{i}") for i in range(3)]
    started = [d.start("talk for a while") for d in drivers]  # each with a cancel event of its own
    wait_for(lambda: all(d.sink.of_type("assistant_stream_delta") for d in drivers))
    assert watcher_threads() == ["neta-run-watcher"]
    # The abort reaches the run only through its row's flag (the test's events are not the pool's).
    run_abort(actor=None, session_id=drivers[1].session_id)
    for thread, _, _ in started:
        thread.join(timeout=30)
    assert [holder[0].status for _, holder, _ in started] == [RunStatus.COMPLETED, RunStatus.ABORTED, RunStatus.COMPLETED]


def test_one_poll_is_one_query_for_every_run_and_the_heartbeat_one_update(driver_for):
    watcher = RunWatcher(thread=False)
    runs, events = [], []
    for i in range(3):
        driver = driver_for(rules(), name=f"polled{i}")
        queued = session_prompt(session_id=driver.session_id, text="hi", actor=None, dispatch=False).run
        runs.append(lifecycle.claim(queued.run_id, worker="test", owner=this_process()))
        events.append(threading.Event())
        watcher.watch(runs[-1].pk, events[-1])
    AgentRun.objects.filter(pk__in=[r.pk for r in runs]).update(heartbeat_at=None)
    with CaptureQueriesContext(connection) as beat:
        watcher.poll(beat=True)
    assert len(beat) == 2  # one UPDATE of three heartbeats, one SELECT of three flags
    assert all(r.heartbeat_at is not None for r in AgentRun.objects.filter(pk__in=[r.pk for r in runs]))
    AgentRun.objects.filter(pk=runs[2].pk).update(cancel_requested=True)
    with CaptureQueriesContext(connection) as flags:
        watcher.poll(beat=False)
    assert len(flags) == 1 and [e.is_set() for e in events] == [False, False, True]
    watcher.unwatch(runs[0].pk)
    AgentRun.objects.filter(pk__in=[r.pk for r in runs]).update(heartbeat_at=None)
    watcher.poll(beat=True)
    beats = dict(AgentRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", "heartbeat_at"))
    assert beats[runs[0].pk] is None and beats[runs[1].pk] is not None  # a released run is no longer beaten
    assert watcher.watching() == [runs[1].pk, runs[2].pk]


def test_the_watcher_keeps_its_connection_from_one_busy_spell_to_the_next(driver_for):
    """A Celery pool process runs one turn at a time: a watcher that closed its connection
    whenever no run was left opened a new one for every turn."""
    from django.db.backends.signals import connection_created

    watcher = RunWatcher(poll_seconds=0.02, heartbeat_seconds=0.05)
    opened = []

    def note(sender, connection, **kwargs):
        if threading.current_thread() is watcher._thread:
            opened.append(connection)

    connection_created.connect(note, weak=False)
    try:
        driver = driver_for(rules(), name="spells")
        for _ in range(3):
            queued = session_prompt(session_id=driver.session_id, text="hi", actor=None, dispatch=False).run
            run = lifecycle.claim(queued.run_id, worker="test", owner=this_process())
            watcher.watch(run.pk, threading.Event())
            polls = watcher.polls
            wait_for(lambda: watcher.polls >= polls + 3)  # it polled the run, so it is connected
            watcher.unwatch(run.pk)
            AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
            time.sleep(0.1)  # idle between the spells
        assert len(opened) == 1
    finally:
        connection_created.disconnect(note)
