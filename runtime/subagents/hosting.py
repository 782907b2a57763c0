"""Supervising one subagent child, wherever it runs: a thread of the web process (inline
backend) or a Celery task on ``NETA_SUBAGENT_QUEUE`` (``runtime/subagents/tasks.py``).

``supervise_subprocess_run(run_id)`` claims the row (a conditional UPDATE; a second
delivery of the same task finds it taken and does nothing), starts the child with
:class:`~runtime.subagents.supervisor.ChildSupervisor` from the envelope stored on the row,
records its events in batches, publishes the streaming projection, heartbeats, polls the
row's ``cancel_requested`` flag (a parent abort, the REST cancel) and writes the one
terminal state. Proxy requests (``read_skill`` …) run here, in a process with the registry,
re-checked against the envelope.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

from django.db import connection

from runtime.agents.subagent_policy import DELEGATE_TOOLS
from runtime.models import SubprocessRun
from runtime.realtime.sinks import default_sink
from runtime.runs import traces
from runtime.subagents import child_approvals, services
from runtime.subagents import stream_events as S
from runtime.subagents.envelope import EnvelopeError, parse_envelope
from runtime.subagents.protocol import PROTOCOL_VERSION, TERMINAL_TYPES, now_ms
from runtime.subagents.supervisor import ChildSupervisor, SupervisorError
from skills_registry.policy import SkillPolicy
from toolcatalog.protocol import (
    ToolContext,
    UnknownTool,
    get_tool,
    refresh_registry,
    run_tool,
)

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.2  # events are written to the table and the socket at least this often
MIN_FLUSH_SECONDS = 0.05  # … and as soon as they arrive, but a burst within this travels as one write
BEAT_SECONDS = 1.0
CLAIM_WAIT_SECONDS = 0.25  # a session at its concurrency limit: try the claim again


def supervise_subprocess_run(run_id: str, *, max_per_session: int = 8, sink=None, delegate=None) -> SubprocessRun | None:
    """Claim and supervise ``run_id`` to its end; returns the finished row (None: not ours).

    ``delegate(row, envelope, event, sink=, cancel=)`` answers the child's delegate calls
    (``host.delegate_from_child``, handed in by the host and the Celery task so that this
    module does not import the host that starts it); without one, delegation is refused."""
    sink = sink or default_sink()
    try:
        while True:
            claimed = services.subprocess_run_claim(run_id, max_per_session=max_per_session)
            if claimed is not False:
                break
            time.sleep(CLAIM_WAIT_SECONDS)  # the session's other children hold every slot
        if claimed is None:
            return None
        return _supervise(claimed, sink, delegate)
    finally:
        services.done_event(run_id).set()
        connection.close()  # this thread's (or task's) connection: a supervisor thread ends here


def _supervise(run: SubprocessRun, sink, delegate=None) -> SubprocessRun:
    try:
        envelope = parse_envelope(run.envelope)
    except EnvelopeError as exc:
        _finish_without_child(run, sink, "bad_envelope", f"the host built an invalid envelope: {exc}")
        return SubprocessRun.objects.get(pk=run.pk)
    pending: list[dict] = []
    lock = threading.Lock()
    latest: dict = {}  # the usage the child reported last (heartbeats carry it)
    arrived = threading.Event()

    seen = {"turns": 0, "toolCalls": 0}  # counted from the events themselves (no heartbeat lag)

    def on_event(event: dict) -> None:
        with lock:
            pending.append(event)
            kind = event.get("type")
            if kind == "assistant_message":
                seen["turns"] += 1
            elif kind == "tool_call" and event.get("route") != "refused":
                seen["toolCalls"] += 1
            if isinstance(event.get("usage"), dict):
                latest["usage"] = event["usage"]
            reported = event.get("counts") if isinstance(event.get("counts"), dict) else {}
            latest["counts"] = {
                **reported,
                "turns": max(seen["turns"], int(reported.get("turns") or 0)),
                "toolCalls": max(seen["toolCalls"], int(reported.get("toolCalls") or 0)),
            }
            if event.get("type") in TERMINAL_TYPES:
                latest["terminal"] = True
        arrived.set()

    delegations = _Delegations()
    holder: list[ChildSupervisor] = []

    def stop_child(by: str) -> None:
        """Stop the child now (its delegate call came back because it is being cancelled:
        the cancel goes to its stdin before the answer, so it never carries on)."""
        delegations.cancel.set()
        if holder:
            holder[0].cancel(services.cancel_reason(by), by=by)

    try:
        supervisor = ChildSupervisor(
            envelope,
            on_event=on_event,
            on_proxy_request=_proxy_handler(envelope, run=run, sink=sink, delegations=delegations, stop_child=stop_child, delegate=delegate),
            on_approval_request=_approval_handler(run, envelope, stop=delegations.cancel),
        )
        holder.append(supervisor)
        supervisor.start()
    except SupervisorError as exc:
        _finish_without_child(run, sink, "spawn_failed", str(exc))
        return SubprocessRun.objects.get(pk=run.pk)
    services.subprocess_run_started(run, pid=supervisor.pid)
    run.refresh_from_db()
    sink.emit(run.session_id, S.run_started(run, pid=supervisor.pid))
    coalescer = S.EventCoalescer(run, lambda e: sink.emit(run.session_id, e))
    last_beat = 0.0
    cancelled = False
    last_flush = 0.0
    while True:
        # Woken by an event (the socket hears it within MIN_FLUSH_SECONDS, not a fixed tick) or the tick.
        if latest.get("terminal"):  # nothing more to hear: wake on the exit itself
            outcome = supervisor.wait(FLUSH_SECONDS)
        else:
            arrived.wait(FLUSH_SECONDS)
            outcome = supervisor.wait(0)
        since = time.monotonic() - last_flush
        if outcome is None and since < MIN_FLUSH_SECONDS:
            time.sleep(MIN_FLUSH_SECONDS - since)
        arrived.clear()
        _flush(run, pending, lock, coalescer)
        now = last_flush = time.monotonic()
        if outcome is not None:
            break
        if now - last_beat >= BEAT_SECONDS:
            last_beat = now
            if services.subprocess_run_beat(run, usage=latest.get("usage"), counts=latest.get("counts")) and not cancelled:
                cancelled = True
                run.refresh_from_db(fields=["cancelled_by"])
                by = run.cancelled_by or "parent"
                delegations.cancel.set()  # its grandchildren stop with it
                supervisor.cancel(services.cancel_reason(by), by=by)
    _flush(run, pending, lock, coalescer)
    coalescer.flush()
    # The child is gone: a delegate call it was waiting on is stopped, and its grandchildren
    # end (recorded) before the child does, so a finished child has no live descendant.
    delegations.cancel.set()
    delegations.drain(DRAIN_SECONDS)
    child_approvals.cancel_pending(run)  # a request its waiter has not settled yet
    services.subprocess_run_finish(
        run,
        terminal=outcome.terminal,
        exit_code=outcome.exit_code,
        exit_signal=_signal_name(outcome.signal),
        stderr_tail=outcome.stderr_tail,
        noise=outcome.noise,
        cancelled_by=outcome.cancelled_by or "",
    )
    run.refresh_from_db()
    sink.emit(run.session_id, S.run_completed(run))
    return run


def _signal_name(sig) -> str:
    if not sig:
        return ""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _flush(run: SubprocessRun, pending: list, lock: threading.Lock, coalescer: S.EventCoalescer) -> None:
    with lock:
        batch, pending[:] = list(pending), []
    if not batch:
        return
    calls = [e for e in batch if e.get("type") == "model_call"]
    blobs: dict = {}
    for event in calls:  # the texts become blobs: the table and the socket carry the event without them
        sent = event.pop("blobs", None)
        blobs.update(sent if isinstance(sent, dict) else {})
    try:
        services.subprocess_events_record(run, batch)
    except Exception:  # a recording hiccup never loses the run (the terminal state is written apart)
        logger.exception("subagent %s: could not record %d events", run.run_id, len(batch))
    if calls:
        traces.record_child_calls(run, calls, blobs)  # their trace records (never raises)
    for event in batch:
        coalescer.add(event)
    coalescer.flush()


def _finish_without_child(run: SubprocessRun, sink, code: str, message: str) -> None:
    terminal = {
        "v": PROTOCOL_VERSION, "runId": run.run_id.hex, "seq": 1, "ts": now_ms(), "type": "run_error",
        "code": code, "message": message, "partialText": "", "synthetic": True,
    }  # fmt: skip
    services.subprocess_events_record(run, [terminal])
    services.subprocess_run_finish(run, terminal=terminal)
    run.refresh_from_db()
    sink.emit(run.session_id, S.run_completed(run))


#: After a child ends, how long its host waits for the grandchildren it leaves (cancel →
#: SIGTERM 3 s → SIGKILL 8 s, plus the recording) before it writes the child's own end.
DRAIN_SECONDS = 15.0


class _Delegations:
    """The delegate calls a child has in flight here: one cancel flag for all, and a count to drain."""

    def __init__(self):
        self.cancel = threading.Event()
        self._active = 0
        self._cond = threading.Condition()

    def __enter__(self):
        with self._cond:
            self._active += 1

    def __exit__(self, *exc):
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._active == 0, timeout)


def _proxy_handler(envelope, *, run: SubprocessRun | None = None, sink=None, delegations: _Delegations | None = None, stop_child=None, delegate=None):
    """The host side of ``proxy_request``: the supervisor checked that the tool is granted as
    a proxy tool; here skills are re-checked against the envelope's allowlist and the tool
    runs with the child's skill scope (``for_subagent``: the registry's own rules again).
    A delegate tool becomes grandchildren (``delegate``, the host's ``delegate_from_child``: depth, agents,
    concurrency and budgets re-checked against the stored envelope)."""
    allowed = list(envelope.allowed_skills)
    skill_policy = SkillPolicy.from_dict({"allowed": allowed, "subagent_allowed": allowed})
    cfg = envelope.runtime_config
    delegations = delegations or _Delegations()

    def handle(event: dict) -> dict:
        name = event.get("name")
        arguments = event.get("arguments") if isinstance(event.get("arguments"), dict) else {}
        if name in DELEGATE_TOOLS:
            if run is None or delegate is None:
                return {"content": [{"type": "text", "text": "Delegation refused: this host runs no subagents."}], "isError": True}
            with delegations:
                try:
                    answer = delegate(run, envelope, event, sink=sink or default_sink(), cancel=delegations.cancel)
                    asked = SubprocessRun.objects.filter(pk=run.pk, cancel_requested=True).values_list("cancelled_by", flat=True).first()
                    if asked is not None and stop_child is not None:
                        stop_child(asked or "parent")
                    return answer
                finally:
                    connection.close()  # this proxy thread's connection
        if name in ("read_skill", "read_skill_file") and arguments.get("name") not in allowed:
            return {"content": [{"type": "text", "text": f"skill {arguments.get('name')!r} is not available to this subagent"}], "isError": True}
        try:
            tool = get_tool(name)
        except UnknownTool:
            # A tool this process has not registered yet (an MCP server's, listed elsewhere):
            # bring the registry up to date from the rows, once.
            refresh_registry()
            try:
                tool = get_tool(name)
            except UnknownTool as exc:
                return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        ctx = ToolContext(
            roots=tuple(cfg.workspace_roots),
            cwd=cfg.cwd,
            sandbox=cfg.sandbox.mode,
            skill_policy=skill_policy,
            for_subagent=True,
        )
        return run_tool(tool, ctx, arguments).to_dict()

    return handle


def _approval_handler(run: SubprocessRun, envelope, *, stop: threading.Event):
    """The host side of ``approval_request``: the request waits in the parent session for a
    person (``child_approvals``); ``stop`` is set when the child is cancelled or ends."""

    def handle(event: dict) -> dict:
        try:
            return child_approvals.wait_for_decision(run, envelope, event, stop=stop)
        finally:
            connection.close()  # this approval thread's connection

    return handle


def mark_lost_if_unclaimed(run: SubprocessRun, why: str) -> None:
    """A queued run whose submission failed: recorded as failed, never silent."""
    terminal = {
        "v": PROTOCOL_VERSION, "runId": run.run_id.hex, "seq": 1, "ts": now_ms(), "type": "run_error",
        "code": "spawn_failed", "message": why, "partialText": "", "synthetic": True,
    }  # fmt: skip
    if services.subprocess_run_take_unclaimed(run):
        services.subprocess_events_record(run, [terminal])
        services.subprocess_run_finish(run, terminal=terminal)
