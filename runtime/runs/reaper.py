"""The reaper: runs whose process is gone are finished, and nothing they accepted is lost.

A **running** run is lost when its heartbeat (written every second) is older than
``NETA_RUN_STALE_SECONDS``, or at once when the process that claimed it ran on this
host and is gone (pid + process start time, ``runtime/runs/backends.py``). The run becomes
``lost``; its in-flight entry is stored as ``aborted`` with its last checkpoint and
every open tool call gets an aborted result, so the tree stays valid. The prompts it
had accepted and not delivered — its own when the worker died before writing it, and
every queued follow-up or steer — are carried, in order, into a new run (submitted),
or added to the session's active run; only when the session no longer exists are they
recorded as not run, with the reason, on the lost run.

A **queued** run is submitted again when nothing can run it any more: its submitting
process (inline backend) ran on this host and is gone, or no process claimed it for
``NETA_RUN_CLAIM_SECONDS`` (a Celery task lost with its worker, an inline run of
another host) — for Celery, only while the workers are idle: a run waiting behind busy
workers is not lost. After three submissions it fails with the reason.

It runs at start-up and every ``NETA_REAPER_INTERVAL_SECONDS`` (a timer thread in the
inline web process and in each Celery worker; Celery beat too), before each prompt to
a session, and from ``manage.py runtime_reap``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import threading
from decimal import Decimal

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from infra.prepared import P, Prepared
from runtime.models import (
    AgentRun,
    ProcessBeat,
    RunStatus,
)
from runtime.runs import lifecycle, traces
from runtime.runs.backends import submit_run
from runtime.runs.process import HOST, process_gone, this_process
from runtime.runs.questions import expire_questions
from runtime.runs.selectors import runs_with_status
from runtime.runs.turn import close_open_tool_calls
from sessions_tree.errors import SessionNotFound
from sessions_tree.providers import provider_for_session

logger = logging.getLogger(__name__)

MAX_SUBMISSIONS = 3
LOST_TOOL_TEXT = "Tool call aborted: the worker running it was lost."


def reap_stale_runs(
    *, stale_seconds: int | None = None, session_id: str | None = None, start: bool = True, deleting: bool = False
) -> list[AgentRun]:
    """One round: lost running runs, stuck queued runs. Returns the runs it changed.

    ``start=False`` (a short-lived process): runs it submits with the inline backend
    are recorded, not started here; the server's reaper takes them over.
    ``deleting`` (the session is being deleted): the prompts of a lost run are not
    carried into a new run (which would hold the session), they are recorded as not run."""
    stale = stale_seconds if stale_seconds is not None else settings.NETA_RUN_STALE_SECONDS
    found = None
    if session_id is not None:  # one session (a prompt, a delete): its active runs in one read
        found = _ACTIVE_RUNS_OF_SESSION.all(session=session_id)
    changed = _reap_running(stale, session_id, start, deleting, found)
    changed += _reap_queued(session_id, start, found)
    changed += expire_questions(session_id=session_id, start=start, found=found)  # ask_user timeouts
    if session_id is not None and not changed:
        # A prompt's (or a delete's) round that found nothing to reap in its session made
        # no orphans: the rooms' own rounds are the periodic reaper's (every
        # NETA_REAPER_INTERVAL_SECONDS), not every prompt's.
        return changed
    for hook in _round_hooks:  # the rooms above: subagent children of lost supervisors
        try:
            hook()
        except Exception:  # one hook's failure never stops the round
            logger.exception("reaper hook %r failed", hook)
    if session_id is None:  # a whole round (not one session's, before a prompt): the console shows its last
        try:
            traces.prune()  # records past NETA_TRACE_RETENTION_DAYS
        except Exception:  # a failed prune never stops the round
            logger.exception("pruning trace records failed")
        record_pass(changed=len(changed))
    return changed


_ACTIVE_RUNS_OF_SESSION = Prepared(
    lambda: AgentRun.objects.filter(session_id=P("session"), status__in=(RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.WAITING))
    .select_related("agent")
    .order_by("created_at", "pk")  # oldest first: its prompts were accepted first
)


def process_role() -> str:
    """What this process is, for the console: "celery worker", "celery beat", "web" or the command's name."""
    argv = [os.path.basename(a) for a in sys.argv[:4]]
    if argv and argv[0] in ("celery", "__main__.py") and "worker" in argv:
        return "celery worker"
    if argv and argv[0] == "celery" and "beat" in argv:
        return "celery beat"
    if argv and argv[0] in ("daphne", "uvicorn", "gunicorn") or "runserver" in argv or "serve" in argv:
        return "web"
    return " ".join(argv)[:64]


_node = {"name": ""}  # this process's Celery node name, when it is a worker (set_node)


def set_node(name: str) -> None:
    """This process is the Celery worker ``name`` (its ``-n``): its beats say so, and the health
    report matches the workers that answer a broadcast by that name."""
    _node["name"] = name or ""


def record_pass(*, changed: int, error: str = "") -> None:
    """The reaper's pass in this process, as a ``ProcessBeat`` row (one per process, updated in
    place); rows of processes silent for a week go. Never raises: health is not worth a failed round."""
    now = timezone.now()
    try:
        ProcessBeat.objects.update_or_create(
            duty="reaper", host=HOST, pid=os.getpid(),
            defaults={"role": process_role(), "node": _node["name"][:255], "at": now, "changed": changed, "error": error[:500]},
        )
        ProcessBeat.objects.filter(at__lt=now - dt.timedelta(days=7)).delete()
    except DatabaseError:
        logger.exception("could not record the reaper's pass")


_round_hooks: list = []


_batch_settlers: list = []


def add_batch_settler(settler) -> None:
    """``settler(session_id, entry, provider) -> bool`` closes the in-flight ``subagent_batch``
    entry of a lost run and answers its tool call (``runtime.subagents`` adds one: the
    children that finished become results the next prompt sees); False: not handled."""
    if settler not in _batch_settlers:
        _batch_settlers.append(settler)


def add_round_hook(hook) -> None:
    """Run ``hook()`` at the end of every reaper round (``runtime.subagents`` adds its reaper)."""
    if hook not in _round_hooks:
        _round_hooks.append(hook)


def reap_session(session_id: str, *, deleting: bool = False) -> list[AgentRun]:
    """Before a new prompt (or a delete): reap this session's run if its process is gone or silent."""
    return reap_stale_runs(session_id=session_id, deleting=deleting)


# --------------------------------------------------------------------------- running runs


def _reap_running(stale: int, session_id: str | None, start: bool, deleting: bool = False, found: list[AgentRun] | None = None) -> list[AgentRun]:
    cutoff = timezone.now() - dt.timedelta(seconds=stale)
    if found is not None:  # the session's active runs, read once by the round
        candidates = [r for r in found if r.status == RunStatus.RUNNING and ((r.heartbeat_at is not None and r.heartbeat_at < cutoff) or r.host == HOST)]
    else:
        running = AgentRun.objects.filter(status=RunStatus.RUNNING).filter(Q(heartbeat_at__lt=cutoff) | Q(host=HOST))
        if session_id is not None:
            running = running.filter(session_id=session_id)
        # A node running hundreds of turns: their keys and processes only, each process
        # looked at once; the whole rows of the few to reap.
        gone: dict[tuple, bool] = {}
        keys = []
        for pk, host, pid, started, heartbeat in running.values_list("pk", "host", "pid", "process_started", "heartbeat_at"):
            process = (host, pid, started)
            if process not in gone:
                gone[process] = process_gone(host, pid, started)
            if gone[process] or (heartbeat is not None and heartbeat < cutoff):
                keys.append(pk)
        # Oldest first, as every round takes them: the same lock order in every process.
        candidates = AgentRun.objects.filter(pk__in=keys, status=RunStatus.RUNNING).select_related("agent").order_by("created_at", "pk") if keys else []
    reaped = []
    for run in candidates:
        if process_gone(run.host, run.pid, run.process_started):
            reason = f"worker {run.worker or '?'} is gone (process {run.pid} on {run.host} no longer runs)"
        elif run.heartbeat_at is not None and run.heartbeat_at < cutoff:
            reason = f"worker {run.worker or '?'} stopped responding (no heartbeat since {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)"
        else:
            continue
        lost, carried = _lose(run, reason, deleting=deleting)
        if not lost:
            continue
        if carried is not None:
            with transaction.atomic():
                submit_run(carried, start=start)
        run.refresh_from_db()
        reaped.append(run)
        logger.warning("reaped lost run %s of session %s: %s", run.run_id, run.session_id, run.error)
    return reaped


def _lose(run: AgentRun, reason: str, *, deleting: bool = False) -> tuple[bool, AgentRun | None]:
    """Close ``run``'s entries, mark it lost, carry its undelivered prompts. Returns whether
    it was lost here, and a new run to submit, if one was made.

    First this process takes the run over (``lifecycle.take_over``): one reaper wins, and
    one that dies midway leaves a run the next round reaps again. The run stays
    ``running`` while its entries are closed, so a prompt arriving meanwhile queues on it
    instead of starting a run on a tree with an open in-flight entry. Then
    ``lifecycle.lose`` makes it ``lost`` under the session's row lock and moves the prompts
    it holds on. The provider's own locks are never taken while the row lock is held
    (their order is store, then row).
    """
    owner = this_process()
    if not lifecycle.take_over(run, owner):  # it finished, beat again or was taken by another reaper meanwhile
        return False, None
    notes = [reason]
    try:
        finalize_abandoned_entry(run.session_id)
    except SessionNotFound:
        pass
    except Exception as exc:  # never leave the run un-reaped because its tree is odd
        logger.exception("could not close the entries of lost run %s", run.run_id)
        notes.append(f"its in-flight entry could not be closed ({type(exc).__name__}: {exc})")
    try:
        usage_from_tree(run)
    except SessionNotFound:
        pass
    except Exception:  # the figures are an aid: never leave the run un-reaped for them
        logger.exception("could not read the usage of lost run %s from its entries", run.run_id)
    return lifecycle.lose(run, notes, owner=owner, deleting=deleting)


USAGE_COLUMNS = (("input_tokens", "input"), ("output_tokens", "output"), ("cache_read_tokens", "cacheRead"), ("cache_write_tokens", "cacheWrite"))


def usage_from_tree(run: AgentRun) -> None:
    """A dead run's tokens and cost as its replies in the tree say, where they say more than
    its row: the turn writes a reply's usage with its next update of the row (``RunBook``), so
    a run killed during a tool had not written its last reply's. Its replies are the assistant
    messages after its prompt on the active path (it was the session's active run)."""
    if not run.prompt_entry_id:
        return
    path = provider_for_session(run.session_id).get_active_path(run.session_id)
    ids = [e["id"] for e in path]
    if run.prompt_entry_id not in ids:
        return
    tokens = dict.fromkeys((column for column, _ in USAGE_COLUMNS), 0)
    cost = Decimal(0)
    for entry in path[ids.index(run.prompt_entry_id) + 1 :]:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant" or not isinstance(message.get("usage"), dict):
            continue
        usage = message["usage"]
        for column, key in USAGE_COLUMNS:
            tokens[column] += int(usage.get(key) or 0)
        cost += Decimal(str((usage.get("cost") or {}).get("total", 0) or 0))
    row = AgentRun.objects.filter(pk=run.pk).values(*tokens, "cost").first()
    if row is None:
        return
    more = {column: value for column, value in tokens.items() if value > (row[column] or 0)}
    if cost > (row["cost"] or 0):
        more["cost"] = cost
    if more:
        AgentRun.objects.filter(pk=run.pk).update(**more)
        logger.info("lost run %s: usage read back from its entries (%s)", run.run_id, ", ".join(sorted(more)))


def finalize_abandoned_entry(session_id: str) -> dict | None:
    """Store a dangling in-flight entry as aborted (its last checkpoint) and give every open
    tool call of the active path an aborted result (also when the worker died mid-tool)."""
    provider = provider_for_session(session_id)
    entry = provider.get_in_flight(session_id)
    fields = None
    if entry is not None and entry.get("type") == "subagent_batch":
        for settle in _batch_settlers:
            try:
                settled = settle(session_id, entry, provider)
            except Exception:  # the batch is still closed below, as lost
                logger.exception("could not settle the subagent batch %s of session %s", entry.get("id"), session_id)
                settled = False
            if settled:
                close_open_tool_calls(provider, session_id, text=LOST_TOOL_TEXT)
                return provider.get_entry(session_id, entry["id"])
        entry = provider.get_in_flight(session_id)  # a settler that failed midway may have closed it
    if entry is not None and entry.get("type") == "subagent_batch":
        # The parent's host died with its turn: the batch says so (its children are cancelled
        # by the subagent reaper; their runs hold their ends).
        fields = {"metadata": {**(entry.get("metadata") or {}), "state": "lost", "cancelledBy": "the worker running the parent turn was lost"}}
    final = provider.finalize_in_flight(session_id, entry["id"], status="aborted", fields=fields) if entry is not None else None
    close_open_tool_calls(provider, session_id, text=LOST_TOOL_TEXT)
    return final


# --------------------------------------------------------------------------- queued runs


def _reap_queued(session_id: str | None, start: bool, found: list[AgentRun] | None = None) -> list[AgentRun]:
    bound = timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_CLAIM_SECONDS)
    # submitted again in the order they were accepted
    queued = runs_with_status(RunStatus.QUEUED, session_id=session_id, found=found)
    changed = []
    busy = None  # are the Celery workers busy? Asked once per round, when needed
    for run in queued:
        submitted = run.submitted_at or run.created_at
        if process_gone(run.host, run.pid, run.process_started):
            why = f"its submitting process ({run.host} pid {run.pid}) is gone"
        elif submitted < bound and not (run.backend == "inline" and run.host == HOST):
            if run.backend == "celery":
                busy = _celery_workers_busy(bound) if busy is None else busy
                if busy:
                    continue  # its task waits in the queue behind runs the workers are busy with
            why = f"no process claimed it within {settings.NETA_RUN_CLAIM_SECONDS} s"
        else:
            continue  # waiting for a thread of a live process here, or not overdue yet
        if run.submissions >= MAX_SUBMISSIONS:
            if not lifecycle.fail_queued(run, why):
                continue
            logger.warning("failed queued run %s: %s", run.run_id, why)
        else:
            with transaction.atomic():
                if not submit_run(run, backend=settings.NETA_TASK_BACKEND, start=start):
                    continue
            logger.warning("submitted queued run %s again: %s", run.run_id, why)
        run.refresh_from_db()
        changed.append(run)
    return changed


def _celery_workers_busy(bound: dt.datetime) -> bool:
    """A Celery run is running with a fresh heartbeat, or one was claimed since ``bound``.

    Then a queued run's task is most likely waiting in the queue (more prompts than
    worker children, each run taking minutes), not lost: it is left alone. A task lost
    while the workers stay busy is submitted again once they have been idle for
    ``NETA_RUN_CLAIM_SECONDS``; one lost with the worker child that took it is seen at
    once (the child records itself on the run before claiming it, ``runtime/runs/tasks.py``)."""
    fresh = timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_STALE_SECONDS)
    return (
        AgentRun.objects.filter(backend="celery")
        .filter(Q(status=RunStatus.RUNNING, heartbeat_at__gte=fresh) | Q(started_at__gte=bound))
        .exists()
    )


# --------------------------------------------------------------------------- the timer

_timer: threading.Thread | None = None
_timer_lock = threading.Lock()


def start_reaper_timer(interval: float | None = None) -> threading.Thread:
    """Run the reaper in this process now and then every ``interval`` seconds (default
    ``NETA_REAPER_INTERVAL_SECONDS``), on a daemon thread. Once per process."""
    global _timer
    with _timer_lock:
        if _timer is None or not _timer.is_alive():
            _timer = threading.Thread(
                target=_timer_loop, args=(interval or settings.NETA_REAPER_INTERVAL_SECONDS,), name="neta-reaper", daemon=True
            )
            _timer.start()
            logger.info("reaper timer started in process %s (every %s s)", os.getpid(), interval or settings.NETA_REAPER_INTERVAL_SECONDS)
        return _timer


def _timer_loop(interval: float) -> None:
    from django.apps import (
        apps,  # the registry is read in the timer thread, once start-up is over
    )

    stop = threading.Event()
    while not apps.ready:  # started from AppConfig.ready: no query before start-up is over
        stop.wait(0.05)
    while True:
        try:
            reap_stale_runs()
        except Exception as exc:  # the timer never dies; the next round tries again
            logger.exception("reaper round failed")
            record_pass(changed=0, error=f"{type(exc).__name__}: {exc}")
        finally:
            close_old_connections()
        stop.wait(interval)
