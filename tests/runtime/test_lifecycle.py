"""The run lifecycle (runtime/runs/lifecycle.py), transition by transition, verify_action style:
the state before, the call, the state after, the ``run_state`` event sent after the commit
and not before; a refused transition changes nothing and sends nothing.

Plus: nothing else in the code writes ``AgentRun.status`` (a scan of the source), a claim
that raises ends the run ``failed``, and on MariaDB two connections locking in opposite
order deadlock and ``retry_on_deadlock`` runs the victim's transaction again.
"""

from __future__ import annotations

import ast
import re
import logging
import threading

import pytest
from django.db import connections, transaction

from runtime.models import AgentRun, RunInput, RunInputKind, RunStatus
from runtime.realtime.sinks import InMemorySink, set_default_sink
from runtime.runs import lifecycle
from runtime.runs.locks import lock_session, retry_on_deadlock, session_or_not_found
from runtime.runs.process import this_process
from runtime.runs.prompts import run_abort, session_prompt
from runtime.runs.turn import execute_run
from tests.support.rules import rules
from tests.support.services import REPO

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = {"host": "test-host", "pid": 4242, "process_started": 1}


@pytest.fixture
def sink():
    sink = InMemorySink()
    previous = set_default_sink(sink)
    yield sink
    set_default_sink(previous)


@pytest.fixture
def driver(driver_for):
    return driver_for(rules())


def states(sink: InMemorySink) -> list[tuple[str, str]]:
    return [(e["runId"], e["state"]) for e in sink.of_type("run_state")]


def committed(sink: InMemorySink, action):
    """Run ``action`` in a transaction: no event may leave before it commits."""
    before = len(sink.events)
    with transaction.atomic():
        result = action()
        assert len(sink.events) == before, "an event went out before the commit"
    return result


def queued_run(driver, owner=None) -> AgentRun:
    return session_prompt(session_id=driver.session_id, text="hello", actor=owner, dispatch=False).run


def row(run: AgentRun) -> AgentRun:
    return AgentRun.objects.get(pk=run.pk)


def snapshot(run: AgentRun) -> dict:
    r = row(run)
    return {"status": r.status, "error": r.error, "cancel": r.cancel_requested, "inputs": list(RunInput.objects.filter(run=r).values("id", "consumed"))}


# --------------------------------------------------------------------------- queued


def test_create_run_queues_it_and_says_so_after_commit(driver, sink):
    meta = session_or_not_found(driver.session_id)

    def create():
        return lifecycle.create_run(lock_session(meta), agent=driver.agent, prompt="hi")

    run = committed(sink, create)
    assert row(run).status == RunStatus.QUEUED
    assert sink.events == [(driver.session_id, {"type": "run_state", "runId": str(run.run_id), "state": "queued", "error": None})]


def test_a_prompt_on_an_idle_session_announces_its_queued_run(driver, sink):
    run = queued_run(driver)
    assert states(sink) == [(str(run.run_id), "queued")]


def test_queue_input_on_an_active_run_and_refused_on_a_finished_one(driver, sink):
    run = queued_run(driver)
    sink.events.clear()
    item = committed(sink, lambda: lifecycle.queue_input(run, kind=RunInputKind.FOLLOW_UP, text="more"))
    assert item is not None and not item.consumed and item.run_id == run.pk
    assert states(sink) == [(str(run.run_id), "queued")]

    execute_run(run.run_id, sink=InMemorySink())  # runs the prompt and the follow-up
    assert row(run).status == RunStatus.COMPLETED
    sink.events.clear()
    before = snapshot(run)
    assert committed(sink, lambda: lifecycle.queue_input(run, kind=RunInputKind.STEER, text="late")) is None
    assert snapshot(run) == before and sink.events == []


def test_record_submission_once_per_count_and_a_resubmission_is_announced(driver, sink):
    run = queued_run(driver)
    sink.events.clear()
    assert committed(sink, lambda: lifecycle.record_submission(run, backend="inline", owner=OWNER))
    assert sink.events == []  # the first submission: the run was announced when queued
    stale = AgentRun.objects.get(pk=run.pk)
    stale.submissions = 0  # what a second reaper read before the first one won
    assert not lifecycle.record_submission(stale, backend="inline", owner=OWNER)
    assert row(run).submissions == 1 and sink.events == []
    assert committed(sink, lambda: lifecycle.record_submission(run, backend="celery", owner=OWNER))
    assert row(run).submissions == 2 and row(run).backend == "celery"
    assert states(sink) == [(str(run.run_id), "queued")]


def test_fail_queued_records_why_and_refuses_a_stale_count(driver, sink):
    run = queued_run(driver)
    RunInput.objects.create(run=run, text="queued behind it")
    sink.events.clear()
    stale = row(run)
    stale.submissions = 7
    assert not lifecycle.fail_queued(stale, "nobody")
    assert row(run).status == RunStatus.QUEUED and sink.events == []
    assert committed(sink, lambda: lifecycle.fail_queued(row(run), "no process claimed it"))
    after = row(run)
    assert after.status == RunStatus.FAILED and after.finished_at is not None
    assert after.error == "never started: no process claimed it, after 0 submissions; 1 queued prompt(s) not run: the run ended failed"
    assert states(sink) == [(str(run.run_id), "failed")]


# --------------------------------------------------------------------------- running


def test_claim_once_then_refused(driver, sink):
    run = queued_run(driver)
    sink.events.clear()
    claimed = lifecycle.claim(run.run_id, worker="w1", owner=OWNER)
    assert claimed is not None and claimed.status == RunStatus.RUNNING and claimed.worker == "w1" and claimed.pid == 4242
    assert states(sink) == [(str(run.run_id), "running")]
    assert lifecycle.claim(run.run_id, worker="w2", owner=OWNER) is None
    assert row(run).worker == "w1" and len(sink.events) == 1


def test_next_input_returns_a_queued_input_else_completes_the_run(driver, sink):
    run = lifecycle.claim(queued_run(driver).run_id, worker="w", owner=OWNER)
    item = RunInput.objects.create(run=run, text="follow")
    sink.events.clear()
    assert committed(sink, lambda: lifecycle.next_input(run, or_complete=True)) == item
    assert row(run).status == RunStatus.RUNNING and sink.events == []
    assert committed(sink, lambda: lifecycle.consume(run, item))
    assert RunInput.objects.get(pk=item.pk).consumed and states(sink) == [(str(run.run_id), "running")]
    assert not lifecycle.consume(run, item) and len(sink.events) == 1  # consumed once
    assert lifecycle.next_input(run) is None and row(run).status == RunStatus.RUNNING  # without or_complete: only a read
    assert committed(sink, lambda: lifecycle.next_input(run, or_complete=True)) is None
    assert row(run).status == RunStatus.COMPLETED and states(sink)[-1] == (str(run.run_id), "completed")


def test_finish_failed_notes_the_queued_prompts_and_a_second_finish_is_refused(driver, sink):
    run = lifecycle.claim(queued_run(driver).run_id, worker="w", owner=OWNER)
    RunInput.objects.create(run=run, text="never run")
    sink.events.clear()
    assert committed(sink, lambda: lifecycle.finish(run, RunStatus.FAILED, error="boom"))
    assert row(run).error == "boom; 1 queued prompt(s) not run: the run ended failed"
    assert states(sink) == [(str(run.run_id), "failed")]
    before = snapshot(run)
    assert not lifecycle.finish(run, RunStatus.COMPLETED)
    assert snapshot(run) == before and len(sink.events) == 1
    with pytest.raises(ValueError):
        lifecycle.finish(run, RunStatus.LOST)


def test_a_claim_that_raises_ends_the_run_failed(driver, sink, settings):
    settings.NETA_TEST_FAULT_AT = "claim_error"
    run = queued_run(driver)
    sink.events.clear()
    finished = execute_run(run.run_id)
    assert finished.status == RunStatus.FAILED and "InjectedFault" in finished.error and finished.finished_at
    assert states(sink) == [(str(run.run_id), "failed")]
    settings.NETA_TEST_FAULT_AT = ""
    # The session is not wedged: the next prompt starts a run of its own and completes.
    outcome = session_prompt(session_id=driver.session_id, text="again", actor=None, dispatch=False)
    assert outcome.queued_as is None and execute_run(outcome.run.run_id, sink=InMemorySink()).status == RunStatus.COMPLETED


def test_fail_unclaimed_leaves_another_workers_run_alone(driver, sink):
    run = lifecycle.claim(queued_run(driver).run_id, worker="theirs", owner=OWNER)
    sink.events.clear()
    assert not lifecycle.fail_unclaimed(run.run_id, worker="mine", error="x")
    assert row(run).status == RunStatus.RUNNING and sink.events == []
    assert lifecycle.fail_unclaimed(run.run_id, worker="theirs", error="claimed, then it broke")
    assert row(run).status == RunStatus.FAILED and states(sink) == [(str(run.run_id), "failed")]


# --------------------------------------------------------------------------- abort


def test_abort_of_a_queued_run_by_its_user_and_by_staff(driver, sink, owner, staff):
    run = queued_run(driver, owner)
    sink.events.clear()
    committed(sink, lambda: run_abort(session_id=driver.session_id, actor=owner))
    after = row(run)
    assert after.status == RunStatus.ABORTED and after.cancelled_by == owner
    assert after.error == "aborted by the user before it started"
    assert states(sink) == [(str(run.run_id), "aborted")]
    assert run_abort(session_id=driver.session_id, actor=owner) is None  # nothing active: nothing changes
    assert len(sink.events) == 1

    other = queued_run(driver, owner)
    run_abort(run=other, actor=staff)
    assert row(other).error == "aborted by staff staff before it started" and row(other).cancelled_by == staff


def test_abort_of_a_running_run_flags_it_and_the_finish_names_who(driver, sink, owner, staff):
    run = lifecycle.claim(queued_run(driver, owner).run_id, worker="w", owner=OWNER)
    sink.events.clear()
    outcome = committed(sink, lambda: lifecycle.abort(session_id=driver.session_id, actor=staff))
    assert not outcome.stopped and sink.events == []  # still running: the loop finishes it
    after = row(run)
    assert after.status == RunStatus.RUNNING and after.cancel_requested and after.cancelled_by == staff
    lifecycle.abort(session_id=driver.session_id, actor=owner)  # the first to ask is recorded
    assert row(run).cancelled_by == staff
    assert lifecycle.finish(run, RunStatus.ABORTED, abort_when=" before the next model call")
    assert row(run).error == "aborted by staff staff before the next model call"
    assert states(sink) == [(str(run.run_id), "aborted")]


# --------------------------------------------------------------------------- the reaper's


def test_lose_carries_the_undelivered_prompts_into_a_new_queued_run(driver, sink):
    run = lifecycle.claim(queued_run(driver).run_id, worker="w", owner=OWNER)
    RunInput.objects.create(run=run, text="carried")
    run = row(run)
    owner = this_process()
    assert not lifecycle.lose(run, ["gone"], owner=owner)[0]  # not taken over: refused
    assert row(run).status == RunStatus.RUNNING
    sink.events.clear()
    assert lifecycle.take_over(run, owner)
    assert not lifecycle.take_over(run, owner)  # the heartbeat it read is gone: one reaper wins
    lost, carried = committed(sink, lambda: lifecycle.lose(run, ["worker gone"], owner=owner))
    assert lost and carried is not None
    after = row(run)
    assert after.status == RunStatus.LOST and after.error.startswith("worker gone; 2 accepted prompt(s) carried into run")
    assert row(carried).status == RunStatus.QUEUED and row(carried).prompt == "hello"
    assert [i.text for i in RunInput.objects.filter(run=carried)] == ["carried"]
    assert states(sink) == [(str(carried.run_id), "queued"), (str(run.run_id), "lost")]


# --------------------------------------------------------------------------- nobody else writes the status

SCANNED = ("runtime", "neta", "sessions_tree", "toolcatalog", "skills_registry")
LIFECYCLE = "runtime/runs/lifecycle.py"
# A subagent run (SubprocessRun) has a lifecycle of its own, in one module too.
SUBAGENT_LIFECYCLE = "runtime/subagents/services.py"
RUN_MODELS = ("AgentRun", "SubprocessRun")


def status_writes(source: str) -> list[int]:
    """Lines that write a run's status: ``status=`` given to ``update``/``create``/
    ``update_or_create``/``get_or_create`` of a queryset of ``AgentRun`` (a chain
    naming AgentRun or a ``run``, unless it starts at another model's manager), or an
    assignment to ``<…run…>.status``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("update", "create", "update_or_create", "get_or_create", "bulk_update"):
                chain = ast.unparse(node.func.value)
                model = re.match(r"([A-Z]\w*)\.objects\b", chain)
                if model and model.group(1) not in RUN_MODELS:
                    continue  # another model's rows (a SubagentApproval filtered by its run)
                if ("AgentRun" in chain or "run" in chain.lower()) and (
                    any(k.arg == "status" for k in node.keywords) or (node.func.attr == "bulk_update" and "status" in ast.unparse(node))
                ):
                    found.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and t.attr == "status" and "run" in ast.unparse(t.value).lower():
                        found.append(node.lineno)
    return found


def test_the_scan_sees_a_status_write():
    assert status_writes("AgentRun.objects.filter(pk=1).update(status='failed')") == [1]
    assert status_writes("x = 1\nrun.status = 'done'") == [2]
    assert status_writes("AgentRun.objects.create(session_id='s', status='running')") == [1]
    assert status_writes("AgentSession.objects.filter(pk=1).update(status='archived')") == []
    assert status_writes("SubprocessRun.objects.filter(pk=1).update(status='failed')") == [1]
    assert status_writes("SubagentApproval.objects.filter(subprocess_run=run).update(status='cancelled')") == []


def test_nothing_but_the_lifecycle_writes_a_runs_status():
    offenders = []
    for package in SCANNED:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if "migrations" in path.parts or rel in (LIFECYCLE, SUBAGENT_LIFECYCLE):
                continue
            offenders += [f"{rel}:{line}" for line in status_writes(path.read_text(encoding="utf-8"))]
    assert offenders == []
    assert status_writes((REPO / LIFECYCLE).read_text(encoding="utf-8"))  # and the lifecycles do
    subagent_source = (REPO / SUBAGENT_LIFECYCLE).read_text(encoding="utf-8")
    lines = subagent_source.split("\n")
    writes = status_writes(subagent_source)
    assert writes and all("SubprocessRun" in lines[n - 1] for n in writes)  # of subagent runs only


# --------------------------------------------------------------------------- MariaDB: a real deadlock, retried


@pytest.mark.django_db(databases=["default", "mysql"], transaction=True)
def test_two_connections_locking_in_opposite_order_deadlock_and_the_victim_is_retried(mysql_alias, caplog):
    """Each side locks row A then B (or B then A) in a transaction wrapped by
    ``retry_on_deadlock``; InnoDB rolls one back with 1213, which runs again whole: both
    transactions commit, and exactly the retries that happened are logged."""
    with connections[mysql_alias].cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS lifecycle_deadlock (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB")
        cursor.execute("DELETE FROM lifecycle_deadlock")
        cursor.execute("INSERT INTO lifecycle_deadlock VALUES (1, 0), (2, 0)")
    first_locks = threading.Barrier(2)
    attempts = {"ab": 0, "ba": 0}
    errors: list = []

    def side(name: str, order: tuple[int, int]):
        def work():
            attempts[name] += 1
            with connections[mysql_alias].cursor() as cursor:
                cursor.execute("UPDATE lifecycle_deadlock SET n = n + 1 WHERE id = %s", [order[0]])
                if attempts[name] == 1:
                    first_locks.wait(10)  # both hold their first row: the second lock closes the cycle
                cursor.execute("UPDATE lifecycle_deadlock SET n = n + 1 WHERE id = %s", [order[1]])

        def run():
            try:
                retry_on_deadlock(work, what=f"side {name}", using=mysql_alias)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
            finally:
                connections[mysql_alias].close()

        return threading.Thread(target=run)

    with caplog.at_level(logging.WARNING, logger="runtime.runs.locks"):
        threads = [side("ab", (1, 2)), side("ba", (2, 1))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert errors == []
    with connections[mysql_alias].cursor() as cursor:
        cursor.execute("SELECT n FROM lifecycle_deadlock ORDER BY id")
        assert [r[0] for r in cursor.fetchall()] == [2, 2]  # both transactions stood, once each
        cursor.execute("DROP TABLE lifecycle_deadlock")
    retried = [r for r in caplog.records if "retrying the transaction" in r.getMessage()]
    assert sum(attempts.values()) == 3 and len(retried) == 1 and "1213" in retried[0].getMessage()
