"""The subagent host: one delegate call, from the model's request to its tool result (docs/subagents.md).

``delegate(ctx, mode=…, tasks=[…])`` is what the delegate tools call, inside the parent's
turn (``ctx.extras["turn"]``, ``ctx.extras["tool_call_id"]``):

1. **Refuse what the policy does not allow**, whatever the model asks: delegation off, a
   depth at the limit, more tasks than ``max_tasks_per_call``, an agent not on the list.
2. **Records**: one ``SubprocessRun`` per task, idempotent on (parent run, tool call id, task
   index) — a replayed call gets its old rows and never spawns twice.
3. **Tree**: a ``subagent_batch`` entry opened as the in-flight entry at dispatch (the leaf
   moves to it; reloads and compaction see what is running), checkpointed as runs change.
4. **Children**: each task's envelope (tools = parent's effective ∩ child agent's ∩ policy,
   deny wins; skills = the allowlist) stored on its row, then supervised — a thread per child
   in this process (inline backend) or a Celery task per child on ``NETA_SUBAGENT_QUEUE`` —
   at most ``max_concurrency`` at once for this run (and ``max_concurrency_per_session``
   for the session, enforced by the claim). ``chain`` runs them one after the other, each
   step's ``{previous}`` replaced by the previous final text, and stops at a failure.
5. **Abort** of the parent cancels every child (queued ones never start).
6. **End**: the batch entry is finalized (``metadata.runs``, bounded ``metadata.events``,
   ``metadata.finalResults``), one ``subagent_result`` entry per task is appended, and the
   tool result holds every child's full final text (capped per child and per batch with
   head + tail + a reference to the run), flagged as an error when a child failed.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, replace

from celery import current_app
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from runtime.agents.specs import model_spec
from runtime.agents.subagent_policy import (
    DELEGATE_TOOLS,
    SubagentPolicy,
    parse_policy_or_disabled,
)
from runtime.agents.tools import agent_tool_projection
from runtime.models import Agent, SubprocessEvent, SubprocessRun, SubprocessStatus
from runtime.runs import approvals
from runtime.runs.health import queue_consumers
from runtime.subagents import child_approvals, services
from runtime.subagents.envelope import (
    ENVELOPE_VERSION,
    TaskEnvelope,
    parse_envelope,
    tool_settings_from_django,
)
from runtime.subagents.hosting import mark_lost_if_unclaimed, supervise_subprocess_run
from skills_registry.policy import SkillPolicy, SkillPolicyError
from skills_registry.selectors import skills_visible
from toolcatalog.policy import APPROVAL_MODES, PolicyError
from toolcatalog.protected_paths import protected_paths
from toolcatalog.protocol import ToolContext, ToolResult, UnknownTool, get_tool, run_tool
from toolcatalog.sandbox import effective_sandbox

logger = logging.getLogger(__name__)

# The Celery task a child's supervision is sent to (runtime/subagents/tasks.py registers it
# under this name; sent by name so this module does not import the task that imports it).
SUPERVISE_TASK = "runtime.supervise_subagent"
WAIT_SECONDS = 0.25
TASK_PREVIEW_CHARS = 500
RESULT_ENTRY_MAX_CHARS = 1_000_000  # a subagent_result entry keeps the final text up to this
PROCESS_EVENTS_KEPT = 40  # metadata.processEvents of a result entry
NEVER_FOR_CHILDREN = frozenset({"ask_user", *DELEGATE_TOOLS})
#: How long past its limits the host waits for a child's supervisor before it records it lost.
LOST_GRACE_SECONDS = 60.0


class DelegateRefused(Exception):
    """The host will not run this call; the message is the tool result the model reads."""


@dataclass
class Task:
    agent: str
    task: str
    context: str = ""


# --------------------------------------------------------------------------- entry point


def delegate(ctx: ToolContext, *, mode: str, tasks: list[Task]) -> ToolResult:
    """A delegate call of a parent run (``extras["turn"]``) or of a child process
    (``extras["child_parent"]``: its proxy_request, see :func:`delegate_from_child`)."""
    turn = ctx.extras.get("turn") or ctx.extras.get("child_parent")
    call_id = ctx.extras.get("tool_call_id") or ""
    if turn is None or not call_id:
        return ToolResult.error("delegate tools run only inside an agent run (no parent run here)")
    depth = int(ctx.extras.get("depth") or 0)
    try:
        policy_data = turn.delegation_policy if isinstance(turn, ChildParent) else turn.agent.subagent_policy
        policy, agents = _check(policy_data, tasks, depth=depth)
    except DelegateRefused as exc:
        return ToolResult.error(str(exc), details={"refused": True})
    return Batch(turn, ctx, call_id=call_id, mode=mode, tasks=tasks, policy=policy, agents=agents, depth=depth + 1).run()


class _Names:
    """What a child run has: the names of the tools its envelope grants (its "projection")."""

    def __init__(self, names):
        self.names = frozenset(names)

    def effective_names(self):
        return self.names


class ChildParent:
    """The parent of a grandchild batch: a child process that asked to delegate through a
    ``proxy_request``. Quacks like the turn for :class:`Batch`; it has no provider (the
    grandchildren write no tree entries: the tree holds the top-level call's one batch)."""

    provider = None

    def __init__(self, row: SubprocessRun, envelope: TaskEnvelope, *, sink):
        self.row = row
        self.envelope = envelope
        self.run = row.parent_run  # the top-level AgentRun: usage rolls up there, its abort reaches all
        self.session_id = row.session_id
        self.agent = Agent.objects.select_related("model").filter(name=envelope.agent).first() or Agent(name=envelope.agent)
        self.delegation_policy = (envelope.delegation or {}).get("policy")
        self.sink = _SinkHolder(sink)
        self.tools = _ToolsHolder(_Names(t.name for t in envelope.tool_policy.tools))
        self.cwd = envelope.runtime_config.cwd
        self.roots = list(envelope.runtime_config.workspace_roots)
        self.env_passthrough = list(envelope.tool_policy.env_passthrough)
        self.network = envelope.tool_policy.network
        self.parent_run_id = str(row.run_id)


class _SinkHolder:  # ``turn.sink.sink``
    def __init__(self, sink):
        self.sink = sink


class _ToolsHolder:  # ``turn.tools.projection``
    def __init__(self, projection):
        self.projection = projection


def delegate_from_child(row: SubprocessRun, envelope: TaskEnvelope, event: dict, *, sink, cancel: threading.Event) -> dict:
    """The host's answer to a child's ``proxy_request`` for a delegate tool: re-checked
    against the envelope stored on the child's row (the policy snapshot in ``delegation``,
    the child's depth; never what the child says about itself), then run as grandchildren —
    their own ``SubprocessRun`` rows (``parent_subprocess`` = the child), supervised by
    threads of this process, the result the child's tool result. ``cancel`` is set when
    the child is cancelled or ends: the grandchildren are stopped with it."""
    name = event.get("name")
    arguments = event.get("arguments") if isinstance(event.get("arguments"), dict) else {}
    if name not in DELEGATE_TOOLS:
        return ToolResult.error(f"{name!r} is not a delegate tool").to_dict()
    if not (envelope.delegation or {}).get("policy"):
        return ToolResult.error("Delegation refused: this subagent may not delegate.", details={"refused": True}).to_dict()
    ctx = ToolContext(
        roots=tuple(envelope.runtime_config.workspace_roots),
        cwd=envelope.runtime_config.cwd,
        cancel=cancel,
        sandbox=envelope.runtime_config.sandbox.mode,
        for_subagent=True,
        extras={
            "child_parent": ChildParent(row, envelope, sink=sink),
            # Unique in the top-level run: the child's own call ids may repeat across children.
            "tool_call_id": f"{row.run_id.hex}/{event.get('toolCallId') or event.get('requestId')}"[:200],
            "depth": row.depth,
        },
    )
    return run_tool(get_tool(name), ctx, arguments).to_dict()


def _check(policy_data, tasks: list[Task], *, depth: int) -> tuple[SubagentPolicy, dict[str, Agent]]:
    policy, problem = parse_policy_or_disabled(policy_data)
    if problem:
        raise DelegateRefused(f"Delegation refused: the agent's subagent policy is invalid: {problem}")
    if not policy.enabled:
        raise DelegateRefused("Delegation refused: this agent's subagent policy is not enabled.")
    if depth >= policy.max_depth:
        raise DelegateRefused(f"Delegation refused: the maximum subagent depth ({policy.max_depth}) is reached.")
    if not tasks:
        raise DelegateRefused("Delegation refused: give at least one task.")
    if len(tasks) > policy.max_tasks_per_call:
        raise DelegateRefused(
            f"Delegation refused: {len(tasks)} tasks in one call; this agent may delegate at most {policy.max_tasks_per_call} per call."
        )
    agents: dict[str, Agent] = {}
    for i, task in enumerate(tasks):
        if not policy.allows_agent(task.agent):
            allowed = ", ".join(policy.agents) or "none"
            raise DelegateRefused(f"Delegation refused: task {i + 1} names agent {task.agent!r}, which this agent may not delegate to (allowed: {allowed}).")
        if task.agent not in agents:
            child = Agent.objects.select_related("model").filter(name=task.agent, enabled=True).first()
            if child is None:
                raise DelegateRefused(f"Delegation refused: task {i + 1} names agent {task.agent!r}, which does not exist or is disabled.")
            agents[task.agent] = child
    return policy, agents


# --------------------------------------------------------------------------- the batch


class Batch:
    def __init__(self, turn, ctx: ToolContext, *, call_id: str, mode: str, tasks: list[Task], policy: SubagentPolicy, agents: dict, depth: int):
        self.turn = turn
        self.ctx = ctx
        self.call_id = call_id
        self.mode = mode
        self.tasks = tasks
        self.policy = policy
        self.agents = agents
        self.depth = depth
        self.provider = turn.provider
        self.session_id = turn.session_id
        self.nested = isinstance(turn, ChildParent)  # grandchildren: no tree entries of their own
        self.batch_id = uuid.uuid4().hex
        self.cancelled_by: str | None = None
        self.budget_stop: dict | None = None  # which batch budget stopped the call
        self.rows: list[SubprocessRun] = []
        self.threads: list[threading.Thread] = []
        self.lost = False  # settled by the reaper after the parent's process was lost
        self.worker_checked_at = float("-inf")  # when the workers were last asked (monotonic)
        self.started_at = time.time()
        wall = policy.batch_budget.wall_clock_seconds
        self.deadline_ms = int((self.started_at + wall) * 1000) if wall else None
        if self.nested:  # a grandchild never outlives the child that waits for it
            self.deadline_ms = min(d for d in (self.deadline_ms, _child_end_ms(turn.row, turn.envelope)) if d is not None)

    # -- the whole call --------------------------------------------------------------

    def run(self) -> ToolResult:
        if self.nested:
            parent_entry_id = self.turn.row.parent_entry_id
        else:
            # The usage of the reply that delegated is written now, not with the next reply:
            # a parent lost while its children run keeps its own model calls in its record.
            book = getattr(self.turn, "book", None)
            if book is not None:
                book.flush()
            parent_entry_id = self.provider.get_session(self.session_id).leaf_entry_id or ""
        rows = services.subprocess_runs_create(
            parent_run=self.turn.run,
            batch_id=self.batch_id,
            tool_call_id=self.call_id,
            mode=self.mode,
            parent_entry_id=parent_entry_id,
            tasks=[{"agent": t.agent, "task": t.task} for t in self.tasks],
            depth=self.depth,
            parent_subprocess=self.turn.row if self.nested else None,
            backend="inline" if self.nested else None,
        )
        if any(r.batch_entry_id for r in rows):  # a replay of a call that was dispatched before
            self.batch_id = rows[0].batch_id
            self._wait([r for r in rows if r.is_active], replay=True)
            return self._tool_result([SubprocessRun.objects.get(pk=r.pk) for r in rows], replayed=True)
        self.batch_id = rows[0].batch_id
        self.rows = rows  # the batch budget counts every task's subtree (a chain's later steps too)
        if self.nested:  # the grandchildren belong to the top-level call's one batch entry
            self.entry_id = self.turn.row.batch_entry_id
        else:
            entry = self.provider.begin_in_flight_batch(
                self.session_id,
                batch_id=self.batch_id,
                mode=self.mode,
                runs=self._run_summaries(rows),
                metadata={"toolCallId": self.call_id, "parentRunId": str(self.turn.run.run_id), "state": "running"},
            )
            self.entry_id = entry["id"]
        SubprocessRun.objects.filter(pk__in=[r.pk for r in rows]).update(batch_entry_id=self.entry_id)
        try:
            if self.mode == "chain":
                self._run_chain(rows)
            else:
                for row, task in zip(rows, self.tasks):
                    self._prepare(row, task, task.task)
                self._run_wave(rows)
        except Exception as exc:  # the host never leaves the parent hanging: every row ends
            logger.exception("subagent batch %s failed in the host", self.batch_id)
            for row in rows:
                services.subprocess_run_cancel(row, by=f"host error: {type(exc).__name__}")
            self._wait(rows)
        rows = [SubprocessRun.objects.get(pk=r.pk) for r in rows]
        if not self.nested and self.cancelled_by is None and any((r.cancelled_by or "").startswith(services.BUDGET_CANCEL_PREFIX) for r in rows):
            self._check_batch_budget(rows)  # a call below stopped the subtree for this call's budget first
        self._note_deadline_stop(rows)
        if not self.nested:
            self._write_entries(rows)
        return self._tool_result(rows)

    # -- envelopes --------------------------------------------------------------------

    def _prepare(self, row: SubprocessRun, task: Task, text: str) -> None:
        child = self.agents[task.agent]
        envelope, denied = build_envelope(
            parent=self.turn, child=child, policy=self.policy, row=row, task_text=text, context=task.context,
            batch_id=self.batch_id, deadline_ms=self.deadline_ms, depth=self.depth,
        )  # fmt: skip
        services.subprocess_run_prepare(
            row, envelope=envelope.to_dict(), limits=envelope.limits.to_dict(), denied_tools=denied, batch_entry_id=self.entry_id
        )

    # -- running ------------------------------------------------------------------------

    def _run_wave(self, rows: list[SubprocessRun]) -> None:
        """Start up to ``max_concurrency`` at once; the next one when one ends."""
        waiting = list(rows)
        running: list[SubprocessRun] = []
        while waiting or running:
            self._check_parent(rows)
            while waiting and len(running) < self.policy.max_concurrency and self.cancelled_by is None:
                row = waiting.pop(0)
                self._submit(row)
                running.append(row)
            if self.cancelled_by is not None:
                for row in waiting:
                    services.subprocess_run_cancel(row, by=self.cancelled_by)
                waiting = []
            running = self._still_active(running)
            if running:
                self._pause(running)
                self._check_batch_budget(self.rows or rows)
            self._checkpoint(rows)
        self._join()

    def _run_chain(self, rows: list[SubprocessRun]) -> None:
        previous = ""
        for i, (row, task) in enumerate(zip(rows, self.tasks)):
            if self.cancelled_by is not None:
                services.subprocess_run_cancel(row, by=self.cancelled_by)
                continue
            self._prepare(row, task, task.task.replace("{previous}", previous))
            self._run_wave([row])
            row.refresh_from_db()
            if row.status != SubprocessStatus.COMPLETED:
                for later in rows[i + 1 :]:
                    services.subprocess_run_cancel(later, by=f"chain stopped at step {i + 1} ({row.status})")
                break
            previous = row.final_text
        self._checkpoint(rows)

    def _submit(self, row: SubprocessRun) -> None:

        limit = self.policy.max_concurrency_per_session
        # A grandchild is supervised by a thread of the process that supervises its parent
        # child (under Celery too): a one-slot subagent worker never waits on itself.
        if settings.NETA_TASK_BACKEND == "celery" and not self.nested:

            row.refresh_from_db(fields=["limits"])
            limits = row.limits or {}
            # Above the child's own wall clock: the supervisor stops the child first, and a
            # hard limit would kill the pool process but not the child's process group.
            hard = int(float(limits.get("wallClockSeconds") or 600) + float(limits.get("idleSeconds") or 60) + 120)
            try:
                current_app.send_task(
                    SUPERVISE_TASK, args=[str(row.run_id), limit], queue=settings.NETA_SUBAGENT_QUEUE, time_limit=hard, soft_time_limit=hard - 30
                )
            except Exception as exc:  # noqa: BLE001 - a broker down is a failed child, not a hung parent
                mark_lost_if_unclaimed(row, f"could not enqueue the child on {settings.NETA_SUBAGENT_QUEUE!r}: {exc}")
            return
        thread = threading.Thread(
            target=supervise_subprocess_run, args=(str(row.run_id),), kwargs={"max_per_session": limit, "sink": self.turn.sink.sink, "delegate": delegate_from_child},
            name=f"subagent-host-{row.run_id}", daemon=True,
        )  # fmt: skip
        thread.start()
        self.threads.append(thread)

    def _still_active(self, rows: list[SubprocessRun]) -> list[SubprocessRun]:
        if not rows:
            return []
        active = set(
            SubprocessRun.objects.filter(pk__in=[r.pk for r in rows], status__in=services.ACTIVE_SUBPROCESS_STATUSES).values_list("pk", flat=True)
        )
        for row in rows:
            if row.pk not in active:
                services.forget_done_event(str(row.run_id))
        return [r for r in rows if r.pk in active]

    def _pause(self, running: list[SubprocessRun]) -> None:
        """Wait a little, waking at once when a child of this process ends."""
        events = [services.done_event(str(r.run_id)) for r in running]
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if any(e.is_set() for e in events) or self.ctx.cancel.is_set():
                return
            time.sleep(0.02)
        self._overdue(running)

    def _overdue(self, running: list[SubprocessRun]) -> None:
        """A child far past its limits whose supervisor says nothing: recorded lost (the
        parent never hangs on a dead worker); one never claimed by any worker: failed."""
        now = timezone.now()
        rows = list(SubprocessRun.objects.filter(pk__in=[r.pk for r in running]))
        if not self._subagent_worker_alive(rows, now):
            why = f"no subagent worker: no live worker consumes queue {settings.NETA_SUBAGENT_QUEUE!r}"
            for row in rows:
                if row.status == SubprocessStatus.QUEUED and row.backend == "celery":
                    mark_lost_if_unclaimed(row, why)
            return
        for row in rows:
            limits = row.limits or {}
            budget = float(limits.get("wallClockSeconds") or 600) + float(limits.get("idleSeconds") or 60) + LOST_GRACE_SECONDS
            if row.status == SubprocessStatus.QUEUED:
                waited = (now - row.created_at).total_seconds()
                if row.backend == "celery" and waited > settings.NETA_RUN_CLAIM_SECONDS + budget:

                    mark_lost_if_unclaimed(row, f"no worker on queue {settings.NETA_SUBAGENT_QUEUE!r} took it within {waited:.0f} s")
                continue
            beat = row.heartbeat_at or row.started_at or row.created_at
            if (now - beat).total_seconds() > settings.NETA_RUN_STALE_SECONDS or (row.started_at and (now - row.started_at).total_seconds() > budget):
                services.subprocess_runs_reap(stale_seconds=settings.NETA_RUN_STALE_SECONDS)
                break

    def _subagent_worker_alive(self, rows: list[SubprocessRun], now) -> bool:
        """False when a child has been queued on Celery for NETA_SUBAGENT_WORKER_CHECK_SECONDS
        and no live worker consumes the subagent queue (asked at most once that often)."""
        every = settings.NETA_SUBAGENT_WORKER_CHECK_SECONDS
        if not every:
            return True
        waiting = [r for r in rows if r.status == SubprocessStatus.QUEUED and r.backend == "celery"]
        if not any((now - r.created_at).total_seconds() >= every for r in waiting):
            return True
        if time.monotonic() - self.worker_checked_at < every:
            return True
        consumers = queue_consumers(settings.NETA_SUBAGENT_QUEUE)
        self.worker_checked_at = time.monotonic()
        return consumers != []  # None: the broker could not be asked; the claim timeout still holds

    def _check_batch_budget(self, rows: list[SubprocessRun]) -> None:
        """``batch_budget``: turns, tool calls, tokens and cost summed over the call's whole
        subtree (its children and every grandchild below them: what they reported so far —
        events and heartbeats, then their ends), and the call's wall clock. Over one, every
        child still out is stopped with that budget's code (a running one ends ``partial``
        with its text, its descendants too; a queued one never starts) and the batch says
        ``state: budget_stopped`` with the budget in ``budgetStop``."""
        budget = self.policy.batch_budget
        if self.cancelled_by is not None:
            return
        stop = None
        if self.deadline_ms is not None and not self.nested and time.time() * 1000 >= self.deadline_ms:
            stop = ("budget_wall_clock", budget.wall_clock_seconds, round(time.time() - self.started_at, 1), "s")
        limits = {"turns": budget.max_turns, "toolCalls": budget.max_tool_calls, "tokens": budget.max_tokens, "cost": budget.max_cost}
        if stop is None and any(v is not None for v in limits.values()):
            used = subtree_spent(rows)
            for key, code, unit in (("turns", "budget_turns", "turns"), ("toolCalls", "budget_tool_calls", "tool calls"),
                                    ("tokens", "budget_tokens", "tokens"), ("cost", "budget_cost", "USD")):  # fmt: skip
                if limits[key] is not None and used[key] >= limits[key]:
                    stop = (code, limits[key], used[key], unit)
                    break
        if stop is None:
            return
        code, limit, spent, unit = stop
        self.budget_stop = {"code": code, "limit": limit, "used": spent, "unit": unit}
        what = f"${spent:.4f} of ${limit:g}" if code == "budget_cost" else f"{spent:g} {unit} of {limit:g}"
        self.cancelled_by = f"{services.BUDGET_CANCEL_PREFIX}{code} ({what}, whole subtree)"[:200]
        if self.nested:
            # The budget is the top call's: the children waiting on this call (and above) are
            # stopped with it too, first, so none of them answers "done" with what came back.
            ancestor = self.turn.row
            while ancestor is not None:
                services.subprocess_run_cancel(ancestor, by=self.cancelled_by)
                ancestor = ancestor.parent_subprocess
        for row in rows:
            services.subprocess_run_cancel(row, by=self.cancelled_by)

    def _note_deadline_stop(self, rows: list[SubprocessRun]) -> None:
        """The batch wall clock usually stops the children from inside (it is their envelope's
        ``deadline``) before the host's own check fires: a child that ended ``budget_wall_clock``
        because the batch deadline came before its own wall clock still makes the batch
        ``budget_stopped``."""
        if self.budget_stop is not None or self.deadline_ms is None or self.nested:
            return
        for row in rows:
            if row.error_code != "budget_wall_clock" or row.started_at is None:
                continue
            own_end_ms = (row.started_at.timestamp() + float((row.limits or {}).get("wallClockSeconds") or 600)) * 1000
            if self.deadline_ms <= own_end_ms:
                spent = round(time.time() - self.started_at, 1)
                self.budget_stop = {"code": "budget_wall_clock", "limit": self.policy.batch_budget.wall_clock_seconds, "used": spent, "unit": "s"}
                if self.cancelled_by is None:
                    self.cancelled_by = f"{services.BUDGET_CANCEL_PREFIX}budget_wall_clock (the call's {self.policy.batch_budget.wall_clock_seconds:g} s deadline)"
                return

    def _check_parent(self, rows: list[SubprocessRun]) -> None:
        if self.cancelled_by is None and self.ctx.cancel.is_set():
            if self.nested:
                # The reason the parent subagent was stopped for, as the cancel cascade gives it
                # (the cascade and this check race: whichever cancels first, the reason is one).
                above = SubprocessRun.objects.filter(pk=self.turn.row.pk).values_list("cancelled_by", flat=True).first()
                self.cancelled_by = services.cascade_reason(self.turn.row, above) if above else f"parent subagent {self.turn.row.run_id} stopped"
            else:
                self.cancelled_by = f"parent run {self.turn.run.run_id} aborted"
            for row in rows:
                services.subprocess_run_cancel(row, by=self.cancelled_by)

    def _wait(self, rows: list[SubprocessRun], *, replay: bool = False) -> None:
        running = self._still_active(rows)
        while running:
            self._check_parent(running)
            self._pause(running)
            running = self._still_active(running)
        self._join()

    def _join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=1)
        self.threads = [t for t in self.threads if t.is_alive()]

    # -- the tree -------------------------------------------------------------------------

    def _run_summaries(self, rows) -> list[dict]:
        return [
            {
                "runId": str(r.run_id), "taskIndex": r.task_index, "agent": r.agent,
                "task": r.task[:TASK_PREVIEW_CHARS], "status": r.status,
            }  # fmt: skip
            for r in rows
        ]

    def _checkpoint(self, rows: list[SubprocessRun]) -> None:
        if self.nested:
            return
        fresh = list(SubprocessRun.objects.filter(pk__in=[r.pk for r in rows]).order_by("task_index"))
        summaries = self._run_summaries(fresh)
        if summaries != getattr(self, "_last_summaries", None):
            self._last_summaries = summaries
            try:
                self.provider.update_in_flight_fields(self.session_id, self.entry_id, {"runs": summaries})
            except Exception:  # a checkpoint is an aid for reloads; the final entry is what counts
                logger.exception("subagent batch %s: checkpoint failed", self.batch_id)

    def _write_entries(self, rows: list[SubprocessRun]) -> None:
        caps = self._caps(rows)
        budget_stop = bool(self.cancelled_by and self.cancelled_by.startswith(services.BUDGET_CANCEL_PREFIX))
        aborted = bool(self.cancelled_by) and not budget_stop
        state = "lost" if self.lost else "cancelled" if aborted else "budget_stopped" if budget_stop else "finished"
        self.provider.finalize_in_flight(
            self.session_id,
            self.entry_id,
            status="aborted" if aborted else "completed",
            fields={
                "runs": self._run_summaries(rows),
                "metadata": {
                    "toolCallId": self.call_id,
                    "parentRunId": str(self.turn.run.run_id),
                    "state": state,
                    "cancelledBy": self.cancelled_by,
                    **({"budgetStop": self.budget_stop} if self.budget_stop else {}),
                    "runs": [run_record(r, with_subagents=True) for r in rows],
                    "events": events_summary(rows),
                    "finalResults": [final_result(r, caps[r.pk]) for r in rows],
                },
            },
        )
        for row in rows:
            events = list(
                SubprocessEvent.objects.filter(run=row).exclude(type__in=("assistant_delta", "heartbeat")).order_by("-seq")[:PROCESS_EVENTS_KEPT]
            )
            self.provider.append_subagent_result(
                self.session_id,
                batch_id=self.batch_id,
                run_id=str(row.run_id),
                agent=row.agent,
                status=row.status,
                content={
                    "results": [
                        {
                            "status": row.status, "agent": row.agent, "task": row.task, "taskIndex": row.task_index,
                            "finalText": row.final_text[:RESULT_ENTRY_MAX_CHARS],
                            "finalTextChars": len(row.final_text),
                            "errorCode": row.error_code or None, "error": row.error or None,
                            "usage": row.usage or {}, "counts": row.counts or {}, "deniedTools": row.denied_tools or [],
                            "subagents": subagents_of(row),
                        }  # fmt: skip
                    ]
                },
                is_error=row.status in services.FAILED_STATUSES,
                metadata={"processEvents": [_event_line(e) for e in reversed(events)], "eventCount": row.event_count},
            )
        # The children's approval decisions, after the batch (nothing is appended while it runs):
        # entries the model's context never includes, read back for the session's "allow" rules.
        for data in child_approvals.decision_entries(rows):
            self.provider.append_custom_entry(self.session_id, custom_type=approvals.DECISION_TYPE, data=data)

    # -- the tool result ----------------------------------------------------------------------

    def _caps(self, rows) -> dict[int, int]:
        per_child = self.policy.result_chars_per_child
        share = self.policy.result_chars_per_batch // max(1, len(rows))
        return {r.pk: min(per_child, share) for r in rows}

    def _tool_result(self, rows: list[SubprocessRun], *, replayed: bool = False) -> ToolResult:
        caps = self._caps(rows)
        failed = [r for r in rows if r.status in services.FAILED_STATUSES]
        done = sum(1 for r in rows if r.status == SubprocessStatus.COMPLETED)
        head = f"Subagents: {done}/{len(rows)} completed" + "".join(
            f", {n} {label}" for label, n in _ends(rows) if n
        )  # fmt: skip
        if self.cancelled_by:
            head += f" (stopped: {self.cancelled_by})"
        if replayed:
            head += " (results of the earlier dispatch of this call)"
        parts = [head + "."]
        for row in rows:
            text, _ = cap_text(row.final_text, caps[row.pk], str(row.run_id))
            title = f"## Task {row.task_index + 1} — {row.agent}: {row.status}"
            if row.error_code:
                title += f" ({row.error_code}{': ' + row.error if row.error else ''})"
            parts.append(f"{title}\n\n{text or '(no output)'}")
        details = {
            "batchId": self.batch_id,
            "mode": self.mode,
            "results": [final_result(r, caps[r.pk]) for r in rows],
        }
        return ToolResult(content=[{"type": "text", "text": "\n\n".join(parts)}], details=details, is_error=bool(failed))


# --------------------------------------------------------------------------- pieces

#: How the head line of a tool result counts the children that did not complete.
_END_LABELS = (
    (SubprocessStatus.PARTIAL, "partial"),
    (SubprocessStatus.FAILED, "failed"),
    (SubprocessStatus.CANCELLED, "cancelled"),
    (SubprocessStatus.TIMED_OUT, "timed out"),
    (SubprocessStatus.LOST, "lost"),
)


def _ends(rows) -> list[tuple[str, int]]:
    return [(label, sum(1 for r in rows if r.status == status)) for status, label in _END_LABELS]


def settle_lost_batch(session_id: str, entry: dict, provider) -> bool:
    """The reaper's settler for the open batch of a lost parent run (``runs/reaper.py``).

    The children still out are cancelled (their parent turn is gone: nothing would collect
    a result they finish later, and they would keep spending). The batch entry is closed
    ``state: lost`` with every child's record; each child gets its ``subagent_result`` —
    the finished ones with their answers, the ones still out as ``cancelled`` with what
    they had streamed — and the delegate call its tool result, so the next prompt's
    context sees the work that was done."""
    meta = entry.get("metadata") or {}
    rows = list(SubprocessRun.objects.filter(batch_entry_id=entry["id"], parent_subprocess__isnull=True).select_related("parent_run__agent").order_by("task_index", "pk"))
    if not rows:
        return False
    parent = rows[0].parent_run
    by = f"parent run {parent.run_id} was lost"
    for row in rows:
        if row.is_active:
            services.subprocess_run_cancel(row, by=by)
    rows = [SubprocessRun.objects.get(pk=r.pk) for r in rows]
    for row in rows:  # the record's view: a child still stopping is cancelled, with its text so far
        if row.is_active:
            row.status, row.error_code, row.error = SubprocessStatus.CANCELLED, "cancelled", by
        if not row.final_text and row.status != SubprocessStatus.COMPLETED:
            row.final_text = services.streamed_text(row)
    policy, _ = parse_policy_or_disabled(parent.agent.subagent_policy)
    batch = Batch.__new__(Batch)  # the batch as its host would have ended it, without a turn
    batch.turn = _LostParent(parent)
    batch.provider, batch.session_id, batch.entry_id = provider, session_id, entry["id"]
    batch.call_id, batch.mode, batch.policy, batch.nested = meta.get("toolCallId") or rows[0].tool_call_id, rows[0].mode, policy, False
    batch.batch_id, batch.cancelled_by, batch.budget_stop, batch.lost = rows[0].batch_id, by, None, True
    batch._write_entries(rows)
    result = batch._tool_result(rows)
    provider.append_message(session_id, result.to_pi_tool_result(batch.call_id, _tool_name(rows[0].mode)))
    return True


class _LostParent:
    def __init__(self, run):
        self.run = run


def _tool_name(mode: str) -> str:
    return {"single": "delegate_task", "parallel": "delegate_parallel", "chain": "delegate_chain"}.get(mode, "delegate_parallel")


def cap_text(text: str, cap: int, run_id: str) -> tuple[str, bool]:
    """``text`` whole when it fits, else its head and tail around a reference to the run."""
    if len(text) <= cap:
        return text, False
    omitted = len(text) - cap
    head = cap * 2 // 3
    tail = cap - head
    marker = f"\n\n… [{omitted} characters omitted; the full text is subagent run {run_id}: GET /api/subagent-runs/{run_id}/] …\n\n"
    return text[:head] + marker + text[len(text) - tail :], True


def final_result(row: SubprocessRun, cap: int) -> dict:
    text = row.final_text or ""
    return {
        "runId": str(row.run_id),
        "taskIndex": row.task_index,
        "agent": row.agent,
        "status": row.status,
        "errorCode": row.error_code or None,
        "chars": len(text),
        "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "truncated": len(text) > cap,
    }


def subtree_spent(rows) -> dict:
    """Turns, tool calls, tokens and cost of ``rows`` and every run below them, summed from
    what each reported so far (its heartbeats and events, then its end)."""
    pks = [r.pk for r in rows]
    seen: set[int] = set()
    used = {"turns": 0, "toolCalls": 0, "tokens": 0, "cost": 0.0}
    while pks:
        fresh = [pk for pk in pks if pk not in seen]
        seen.update(fresh)
        for usage, counts in SubprocessRun.objects.filter(pk__in=fresh).values_list("usage", "counts"):
            usage, counts = usage or {}, counts or {}
            used["turns"] += int(counts.get("turns") or 0)
            used["toolCalls"] += int(counts.get("toolCalls") or 0)
            used["tokens"] += int(usage.get("totalTokens") or 0)
            used["cost"] += float((usage.get("cost") or {}).get("total") or 0)
        pks = list(SubprocessRun.objects.filter(parent_subprocess__in=fresh).values_list("pk", flat=True)) if fresh else []
    return used


def _child_end_ms(row: SubprocessRun, envelope: TaskEnvelope) -> int:
    """When the child ``row`` must be done (its wall clock from its start, or its deadline)."""
    start = (row.started_at or timezone.now()).timestamp()
    end = int((start + envelope.limits.wall_clock_seconds) * 1000)
    return min(end, envelope.deadline) if envelope.deadline is not None else end


MAX_SUBAGENTS_LISTED = 64  # per child, in its result entry and run record


def subagents_of(row: SubprocessRun, *, records: bool = False) -> list[dict]:
    """The grandchildren (and below) ``row`` delegated to, in order: each one's status,
    agent, depth, length and SHA-256 of its final text (``records``: the run record), with
    its own ``subagents``. Their final texts reached ``row`` as its delegate tool result;
    the full texts and event logs are their runs (``GET /api/subagent-runs/{id}/``)."""
    out = []
    for child in SubprocessRun.objects.filter(parent_subprocess=row).order_by("created_at", "task_index", "pk")[:MAX_SUBAGENTS_LISTED]:
        if records:
            item = run_record(child, with_subagents=True)
        else:
            text = child.final_text or ""
            item = {
                "runId": str(child.run_id), "agent": child.agent, "depth": child.depth, "task": child.task[:TASK_PREVIEW_CHARS],
                "status": child.status, "errorCode": child.error_code or None, "chars": len(text),
                "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
                "subagents": subagents_of(child),
            }  # fmt: skip
        out.append(item)
    return out


def run_record(row: SubprocessRun, *, with_subagents: bool = False) -> dict:
    record = _run_record(row)
    if with_subagents:
        record["depth"] = row.depth
        record["subagents"] = subagents_of(row, records=True)
    return record


def _run_record(row: SubprocessRun) -> dict:
    return {
        "runId": str(row.run_id),
        "taskIndex": row.task_index,
        "agent": row.agent,
        "status": row.status,
        "pid": row.pid,
        "workerHost": row.worker_host or None,
        "startedAt": row.started_at.isoformat() if row.started_at else None,
        "endedAt": row.ended_at.isoformat() if row.ended_at else None,
        "exitCode": row.exit_code,
        "signal": row.exit_signal or None,
        "errorCode": row.error_code or None,
        "error": row.error or None,
        "cancelledBy": row.cancelled_by or None,
        "usage": row.usage or {},
        "counts": row.counts or {},
        "eventCount": row.event_count,
    }


def events_summary(rows) -> dict:
    """Bounded: counts per type and per run (the full log is the event table)."""
    by_type = dict(
        SubprocessEvent.objects.filter(run__in=[r.pk for r in rows]).values_list("type").annotate(n=Count("id")).order_by("type")
    )
    return {"total": sum(by_type.values()), "byType": by_type, "perRun": {str(r.run_id): r.event_count for r in rows}}


def _event_line(event: SubprocessEvent) -> dict:
    p = event.payload or {}
    line = {"seq": event.seq, "type": event.type, "ts": p.get("ts")}
    for key in ("name", "toolCallId", "isError", "status", "code", "stopReason", "turn"):
        if key in p:
            line[key] = p[key]
    if "preview" in p:
        line["preview"] = str(p["preview"])[:200]
    return line


# --------------------------------------------------------------------------- the envelope


def child_tools(parent_projection, child: Agent, policy: SubagentPolicy, *, allowed_skills: list[str], depth: int = 1) -> tuple[list[dict], list[dict]]:
    """(grants, denied): parent's effective ∩ child agent's (as a subagent) ∩ the policy; deny wins.

    The delegate tools are the one exception to "as a subagent": a child at ``depth`` below
    the policy's ``max_depth`` gets the ones its parent has (route ``main-process-proxy``: the
    host runs the call), unless the policy's tool rules or the child agent's own
    ``disabled`` list take them away."""
    parent_on = set(parent_projection.effective_names())
    child_projection = agent_tool_projection(child, for_subagent=True)
    child_disabled = set((child.tool_policy or {}).get("disabled") or []) if isinstance(child.tool_policy, dict) else set()
    grants, denied = [], []
    for decision in child_projection:
        name = decision.name
        reason = ""
        if name in DELEGATE_TOOLS:
            if name not in parent_on:
                continue  # the parent cannot delegate this way: nothing to take away
            if not policy.delegates_at(depth):
                reason = f"max subagent depth {policy.max_depth} reached (this child runs at depth {depth})"
            elif name in child_disabled:
                reason = "disabled in the child agent's tool policy"
            else:
                ok, why = policy.tool_decision(name)
                if not ok:
                    reason = why
            if reason:
                denied.append({"name": name, "reason": reason})
            else:
                tool = get_tool(name)
                grants.append({"name": name, "route": "main-process-proxy", "description": tool.description, "parameters": tool.parameters})
            continue
        if name in NEVER_FOR_CHILDREN:
            reason = "never offered to subagents"
        elif not decision.effective:
            reason = f"off for the child agent as a subagent: {decision.reason}"
        elif name not in parent_on:
            reason = "the parent run does not have it (a child never gets more than its parent)"
        else:
            ok, why = policy.tool_decision(name)
            if not ok:
                reason = why
            elif decision.route == "worker-local" and get_tool(name).manifest.kind != "builtin":
                reason = "only the builtin tools run inside the child process"
            elif name in ("read_skill", "read_skill_file") and not allowed_skills:
                reason = "no skills are allowed for subagents (subagent_policy.skills)"
        if reason:
            if decision.effective or name in parent_on:
                denied.append({"name": name, "reason": reason})
            continue
        tool = get_tool(name)
        grants.append({"name": name, "route": decision.route, "description": decision.description, "parameters": tool.parameters})
    return grants, denied


def parent_skills(parent) -> set[str] | None:
    """The skills the delegating parent itself may use (a child never gets one its parent was
    denied): a child process's parent has its envelope's allowlist; a top-level run its agent's
    skill policy (None: an invalid policy, nothing passes)."""
    if isinstance(parent, ChildParent):
        return set(parent.envelope.allowed_skills)
    try:
        own = SkillPolicy.from_dict(parent.agent.skill_policy or {})
    except SkillPolicyError:
        return None
    return {s.name for s in skills_visible(policy=own, for_subagent=False)}


def allowed_skills_for(child: Agent, policy: SubagentPolicy, *, parent_has: set[str] | None = None) -> list[str]:
    """The allowlist, narrowed to what the child may see as a subagent (privileged skills,
    ``disable-model-invocation`` ones and those staff closed to subagents never pass), by the
    child agent's own skill policy, and to what the parent has (``parent_has``)."""
    if not policy.skills:
        return []
    if parent_has is not None:
        policy_skills = [s for s in policy.skills if s in parent_has]
        if not policy_skills:
            return []
        policy = replace(policy, skills=tuple(policy_skills))

    try:
        narrowed = SkillPolicy.from_dict({**(child.skill_policy or {}), "subagent_allowed": list(policy.skills)})
    except SkillPolicyError:
        return []
    # disable-model-invocation: a skill only a person may start is never a child's either.
    return [s.name for s in skills_visible(policy=narrowed, for_subagent=True) if not s.disable_model_invocation]


def restricted_system_prompt(*, parent: Agent, child: Agent, depth: int, policy: SubagentPolicy, grants: list[dict], skills: list[str]) -> str:
    lines = [child.system_prompt.strip()] if child.system_prompt.strip() else []
    delegates = any(g["name"] in DELEGATE_TOOLS for g in grants)
    further = (
        f"you may delegate sub-tasks to {', '.join(policy.agents)} with the delegate tools (depth {depth + 1} is the last one allowed below you)"
        if delegates and depth + 1 == policy.max_depth
        else f"you may delegate sub-tasks to {', '.join(policy.agents)} with the delegate tools"
        if delegates
        else "cannot delegate further"
    )
    lines.append(
        f"You are a subagent of agent {parent.name!r}, working on one task it delegated to you (depth {depth} of {policy.max_depth}). "
        f"You run in a separate process with a restricted set of tools; you cannot ask the user anything and {further}. "
        "Your final message is returned to the parent in full: make it a complete, self-contained answer to the task."
    )
    lines.append("Tools: " + (", ".join(g["name"] for g in grants) or "none") + ".")
    if skills:
        lines.append("Skills you may load with read_skill: " + ", ".join(skills) + ".")
    return "\n\n".join(lines)


def model_ref(model) -> dict:
    """The child's model, without its key (``apiKeyEnv`` names the one variable it gets).
    ``model_spec`` resolves a scripted model's relative rules path (the child's cwd is the
    workspace) and refuses a disabled model or one whose key is not set."""

    spec = model_spec(model)
    return {
        "providerKind": model.provider_kind,
        "modelId": spec.model_id,
        "providerName": spec.provider_name,
        "baseUrl": spec.base_url,
        "apiKeyEnv": model.api_key_env or "",
        "contextWindow": model.context_window,
        "maxOutputTokens": model.max_output_tokens,
        "supportsTools": model.supports_tools,
        "supportsThinking": model.supports_thinking,
        "supportsImages": model.supports_images,
        "prices": model.prices,
        "options": dict(spec.options or {}),
        "name": model.name,
    }


def build_envelope(*, parent, child: Agent, policy: SubagentPolicy, row: SubprocessRun, task_text: str, context: str, batch_id: str, deadline_ms, depth: int) -> tuple[TaskEnvelope, list[dict]]:


    skills = allowed_skills_for(child, policy, parent_has=parent_skills(parent) or set())
    grants, denied = child_tools(parent.tools.projection, child, policy, allowed_skills=skills, depth=depth)
    if isinstance(parent, ChildParent):  # what bash may see: never more than the child had
        passthrough, network = parent.env_passthrough, parent.network
        root_agent = (parent.envelope.delegation or {}).get("rootAgent") or parent.agent.name
    else:
        passthrough = list((parent.agent.tool_policy or {}).get("env_passthrough") or [])
        network = bool((parent.agent.tool_policy or {}).get("network", False))
        root_agent = parent.agent.name
    delegates = any(g["name"] in DELEGATE_TOOLS for g in grants)
    budget = policy.child_budget
    limits = {
        "maxTurns": budget.max_turns,
        "maxToolCalls": budget.max_tool_calls,
        "maxTokens": budget.max_tokens,
        "maxCost": budget.max_cost,
        "wallClockSeconds": budget.wall_clock_seconds,
        "idleSeconds": budget.idle_seconds,
        "heartbeatSeconds": min(2.0, budget.idle_seconds / 3),
    }
    thinking = child.thinking_level if child.model.supports_thinking else "off"
    data = {
        "v": ENVELOPE_VERSION,
        "runId": row.run_id.hex,
        "sessionId": parent.session_id,
        "parentEntryId": row.parent_entry_id,
        "parentRunId": getattr(parent, "parent_run_id", None) or str(parent.run.run_id),
        "batchId": batch_id,
        "toolCallId": row.tool_call_id,
        "taskIndex": row.task_index,
        "depth": depth,
        "agent": child.name,
        "task": task_text,
        "restrictedSystemPrompt": restricted_system_prompt(parent=parent.agent, child=child, depth=depth, policy=policy, grants=grants, skills=skills),
        "toolPolicy": {
            "tools": grants,
            "envPassthrough": passthrough,
            "network": network,
        },
        "allowedSkills": skills,
        "contextSummary": context or "",
        "runtimeConfig": {
            "model": model_ref(child.model),
            "thinkingLevel": thinking,
            "cwd": parent.cwd,
            "workspaceRoots": list(parent.roots),
            "sandbox": {
                "mode": effective_sandbox().mode,
                "protectedPaths": [str(p) for p in protected_paths()],
                "toolSettings": tool_settings_from_django(),
            },
            "llmRetries": settings.NETA_LLM_RETRIES,
            "llmRetryBaseMs": settings.NETA_LLM_RETRY_BASE_MS,
        },
        "limits": limits,
        "deadline": deadline_ms,
        "delegation": {"rootAgent": root_agent, "policy": policy.to_dict()} if delegates else {},
        "approval": approval_block(parent, child, grants),
    }
    return parse_envelope(data), denied


def approval_block(parent, child: Agent, grants: list[dict]) -> dict:
    """The envelope's ``approval``: the stricter of the child agent's mode and the mode in
    force where it was delegated from (the parent session's, or the delegating child's),
    with that session's "allow" rules (docs/subagents.md, "Approvals")."""
    own = (child.tool_policy or {}).get("approval") if isinstance(child.tool_policy, dict) else None
    own = own if own in APPROVAL_MODES else "auto"
    if isinstance(parent, ChildParent):
        above = parent.envelope.approval
        mode, rules = approvals.stricter(own, above.mode), [r.to_dict() for r in above.rules]
    else:
        mode = approvals.stricter(own, getattr(parent, "approval_mode", "auto") or "auto")
        rules = [{"tool": r.tool, "prefix": r.prefix} for r in getattr(parent, "approval_rules", ())]
    changing = []
    for grant in grants:
        if grant["route"] != "main-process-proxy":
            continue
        try:
            if get_tool(grant["name"]).changes_with({}):
                changing.append(grant["name"])
        except UnknownTool:
            changing.append(grant["name"])  # a tool nobody classified changes something
    return {"mode": mode, "rules": rules, "changingProxyTools": changing, "timeoutSeconds": float(settings.NETA_ASK_USER_TIMEOUT_SECONDS)}


class _TopParent:
    """A parent agent as ``build_envelope``'s pieces read it, for a projection without a run."""

    def __init__(self, agent: Agent):
        self.agent = agent


def child_projection(parent: Agent, child: Agent, policy: SubagentPolicy, *, depth: int = 1) -> dict:
    """What ``child`` gets when ``parent`` delegates to it at ``depth`` (the API's and the
    console's view of one child): the tools granted with their routes, those taken away with
    the reason, and the skills — computed as the host computes a child's envelope (the
    parent's effective tools ∩ the child agent's own as a subagent ∩ the policy; the skill
    allowlist ∩ the child's skill policy ∩ the parent's skills)."""
    skills = allowed_skills_for(child, policy, parent_has=parent_skills(_TopParent(parent)) or set())
    grants, denied = child_tools(agent_tool_projection(parent), child, policy, allowed_skills=skills, depth=depth)
    return {
        "agent": child.name,
        "depth": depth,
        "tools": [{"name": g["name"], "route": g["route"]} for g in grants],
        "denied": denied,
        "skills": skills,
    }


def child_projections(agent: Agent) -> list[dict]:
    """:func:`child_projection` of every child agent ``agent``'s subagent policy names (an
    ``error`` for one that is missing, disabled or whose policy is invalid); ``[]`` when it
    does not delegate. The API's ``?for=subagent`` and the console's agent page show it."""
    policy, problem = parse_policy_or_disabled(agent.subagent_policy)
    if problem or not policy.enabled:
        return []
    out = []
    for name in policy.agents:
        child = Agent.objects.select_related("model").filter(name=name, enabled=True).first()
        if child is None:
            out.append({"agent": name, "error": "no enabled agent of that name"})
            continue
        try:
            out.append(child_projection(agent, child, policy))
        except (PolicyError, ValueError) as exc:
            out.append({"agent": name, "error": f"cannot project it: {exc}"})
    return out
