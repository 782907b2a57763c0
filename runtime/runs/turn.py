"""The turn loop (docs/runtime.md, "A turn"): plain synchronous code, the same under every backend.

read leaf → build context → append the user entry → open an in-flight assistant
entry (the leaf moves to it) → stream → for each tool call run the tool and
append a ``toolResult`` message → next assistant message … → finalize.

Cancellation is cooperative: ``RunControl`` registers the run with the process's
one watcher thread (``runtime/runs/watcher.py``), which polls the ``cancel_requested``
flag of every run of the process (and writes their heartbeats) and sets each run's
``threading.Event`` that the LLM stream and the tools poll. Every tool
call gets a result, even when the run is aborted, so the transcript stays valid
for the next turn. The in-flight entry is checkpointed every ``NETA_STREAM_SAVE_SECONDS`` while it
streams, so a killed worker leaves content the reaper can finalize.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Self

from django.conf import settings
from django.utils import timezone

from infra.db_threads import release as release_connection
from infra.prepared import Increment, update_rows
from runtime import llm
from runtime.agents.instructions import instructions_for
from runtime.agents.specs import model_spec
from runtime.agents.system_prompt import build_system_prompt
from runtime.agents.tools import AgentTools, agent_tools
from runtime.agents.workspaces import workspace_for
from runtime.crash_points import crash_point
from runtime.llm.sampling import capped_max_tokens
from runtime.llm.thinking import clamp_thinking
from runtime.llm.transport import read_pace, read_wake
from runtime.models import (
    Agent,
    AgentRun,
    ModelConfig,
    RunInput,
    RunInputKind,
    RunStatus,
)
from runtime.realtime import stream_events as se
from runtime.realtime.sinks import (
    Coalescer,
    StreamSink,
    default_sink,
    process_budget,
    streaming_row,
)
from runtime.runs import approvals, failover, lifecycle, retries, telemetry, traces
from runtime.runs.notes import add_note
from runtime.runs.process import HOST, this_process
from runtime.runs.summaries import (
    SummaryCancelled,
    SummaryFailed,
    auto_compaction_due,
    compact_session,
    maybe_auto_compact,
)
from runtime.runs.titles import maybe_auto_title
from runtime.runs.watcher import flag_is_up, run_watcher
from sessions_tree.acting import acting_as
from sessions_tree.context import convert_to_llm
from sessions_tree.ids import now_ms
from sessions_tree.models import AgentSession
from sessions_tree.providers import open_session, provider_for_session
from sessions_tree.providers.base import ROOT, SessionTreeProvider
from toolcatalog import catalog_version
from toolcatalog.protocol import ToolContext, ToolResult, UnknownTool, get_tool, preview_for_approval

logger = logging.getLogger(__name__)

ABORTED_TOOL_TEXT = "Tool call aborted: the run was cancelled before it could run."
SKIPPED_FOR_STEER_TEXT = "Skipped due to queued user message."
ASK_USER = "ask_user"
ONE_QUESTION_TEXT = "Only one question at a time: ask this one after the user has answered the first."
QUESTION_STEERED_TEXT = "The user sent a message instead of answering (it follows)."
FIRST_TOKEN_EVENTS = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})
APPROVAL_STEERED_TEXT = "Not run: the user sent a message instead of deciding on this call (it follows)."
PLAN_ONLY_TEXT = (
    "Refused: this session runs in plan-only mode, where no tool that changes something runs. "
    "Describe the change you would make instead."
)
ONE_WAIT_TEXT = "Not run: another call of this round waits for the user; call this one again after that."
WAIT = ToolResult.error("")  # _approval_gate: the call waits for a person (compared by identity)


class RunControl:
    """Cancellation flag + heartbeat for one run, shared by the stream and the tools.

    The process's one watcher (``runtime/runs/watcher.py``) polls the flag and writes the
    heartbeat for every run of the process; ``check()`` looks at the flag at once."""

    def __init__(self, run: AgentRun, *, cancel: threading.Event | None = None):
        self.run_pk = run.pk
        self.cancel = cancel or threading.Event()

    def __enter__(self) -> Self:
        run_watcher().watch(self.run_pk, self.cancel)
        return self

    def __exit__(self, *exc) -> None:
        run_watcher().unwatch(self.run_pk)

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def check(self) -> bool:
        """Look at the flag now (one query), not at the watcher's next poll."""
        if not self.cancel.is_set() and flag_is_up(self.run_pk):
            self.cancel.set()
        return self.cancel.is_set()


class RunBook:
    """The run's bookkeeping the turn owes its row: the replies' usage, the tool rounds and
    the end of a reply (its in-flight id cleared), written with the next UPDATE the turn
    makes of the row anyway (the next reply's opening, or the finish) instead of one
    statement each. ``pending()`` is what that UPDATE adds; ``written()`` once it committed
    (the in-memory run then shows it). A run that dies in between has lost those figures
    from its row only: every reply's usage is in its entry in the tree."""

    def __init__(self, run: AgentRun):
        self.run = run
        self._clear()

    def _clear(self) -> None:
        self.tokens = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
        self.cost = Decimal(0)
        self.fields: dict = {}

    def add_usage(self, usage: dict) -> None:
        """A finalized reply: its usage, and the run's in-flight id cleared."""
        for column, key in (("input_tokens", "input"), ("output_tokens", "output"), ("cache_read_tokens", "cacheRead"), ("cache_write_tokens", "cacheWrite")):
            self.tokens[column] += int(usage.get(key) or 0)
        self.cost += Decimal(str((usage.get("cost") or {}).get("total", 0) or 0))
        self.fields["in_flight_entry_id"] = ""

    def set(self, **fields) -> None:
        self.fields.update(fields)

    def pending(self) -> dict:
        """The columns to write, the sums as ``Increment``s (for ``update_rows``)."""
        out = dict(self.fields)
        for column, value in self.tokens.items():
            if value:
                out[column] = Increment(value)
        if self.cost:
            out["cost"] = Increment(self.cost)
        return out

    def flush(self) -> None:
        """Write what is pending now, on its own: before work long enough that losing the
        process would lose the figures with it (a subagent batch runs for minutes)."""
        pending = self.pending()
        if pending:
            update_rows(AgentRun, {"pk": self.run.pk}, pending)
            self.written()

    def written(self) -> None:
        run = self.run
        for column, value in self.tokens.items():
            setattr(run, column, getattr(run, column) + value)
        run.cost = (run.cost or Decimal(0)) + self.cost
        for name, value in self.fields.items():
            setattr(run, name, value)
        self._clear()


@dataclass
class Turn:
    """Everything one run needs, resolved once."""

    run: AgentRun
    agent: Agent
    model: ModelConfig
    provider: SessionTreeProvider
    sink: Coalescer
    control: RunControl
    tools: AgentTools  # the effective projection, and the one way a call runs
    cwd: str
    roots: list[str]
    system_prompt: str
    # The session row, read once when the turn is prepared and kept current by every
    # write the turn passes it to (``meta=``), so no step reads it again on its own.
    meta: AgentSession | None = None
    # The prompt's message, stored together with the first reply's in-flight entry.
    pending_prompt: dict | None = None
    # An ``ask_user`` call of the current round, or a call waiting for approval
    # (runs/approvals.py): the run parks on it (``waiting``).
    question: dict | None = None
    # The approval mode in force and the session's "allow for this session" rules, read from
    # the active path before each model call; the settled request a resumed run carries out.
    approval_mode: str = "auto"
    approval_rules: tuple = ()
    approved: dict | None = None
    # The run's model and tool calls as they happened, written when it stops executing (traces.py).
    trace: traces.Pending = field(default_factory=traces.Pending)
    # The last tool result of a round, stored together with the next reply's in-flight
    # entry (one write), or on its own before anything else the run does (``_store_results``).
    pending_results: list[tuple[dict, str, ToolResult]] = field(default_factory=list)
    book: RunBook | None = None
    spec: llm.ModelSpec = field(init=False)
    # The model of the last call (the run's, or the fallback that answered it) and the
    # fallback that answered the run's last call, asked first by the next (failover.py).
    call_spec: llm.ModelSpec = field(init=False)
    answering: object | None = None
    overflow_retried: bool = False
    # The model that made the last call, whether its error may pass, and the retries of a
    # call whose output had begun (runtime/runs/retries.py).
    call_candidate: object | None = None
    call_transient: bool = False
    retry_attempt: int = 0
    retry_failed: set = field(default_factory=set)

    def __post_init__(self):
        self.spec = model_spec(self.model)
        self.call_spec = self.spec

    @property
    def session_id(self) -> str:
        return self.run.session_id

    def emit(self, event: dict) -> None:
        self.sink.emit(event)


# --------------------------------------------------------------------------- entry point


def execute_run(run_id, *, sink: StreamSink | None = None, cancel: threading.Event | None = None) -> AgentRun | None:
    """Claim and run ``run_id`` to the end. Returns the finished run, or None if not claimable.

    Every change of the run's state is a ``lifecycle`` transition, which sends the
    ``run_state`` event after its commit. A failure anywhere, the claim included, ends
    the run in a recorded state (``failed``), never left queued or running behind a
    task that was acknowledged; if even that record cannot be written, the error goes
    up and the reaper finds the run (its heartbeat stops).

    The caller owns the thread's database connection (the inline pool and Celery
    close stale ones between jobs); it is not recycled here, on the hot path.
    """
    sink = sink or default_sink()
    worker = f"{HOST}:{os.getpid()}:{threading.current_thread().name}"
    try:
        run = lifecycle.claim(run_id, worker=worker, owner=this_process(), sink=sink)
    except Exception as exc:
        logger.exception("claiming run %s failed", run_id)
        lifecycle.fail_unclaimed(run_id, worker=worker, error=f"the run could not be started: {type(exc).__name__}: {exc}", sink=sink)
        return AgentRun.objects.filter(run_id=run_id).first()
    if run is None:
        return None
    coalescer = Coalescer(sink, run.session_id, rate=settings.NETA_STREAM_RATE, budget=process_budget())
    # The model's events are read no more often than the coalescer can send them on; an
    # abort ends a paced wait at once.
    cancel = cancel or threading.Event()
    pacing, waking = read_pace.set(coalescer.read_pace), read_wake.set(cancel)
    book = RunBook(run)
    turn: Turn | None = None
    try:
        # What the run writes is done for whoever prompted it (sessions_tree.acting).
        with RunControl(run, cancel=cancel) as control, acting_as(user_id=run.user_id):
            # The claim read the catalog's version: the projection and the skill index come
            # from what this process keeps at it (toolcatalog/catalog_version.py).
            with catalog_version.at_version(getattr(run, "catalog_version", None)):
                turn = _prepare(run, coalescer, control, book)
            # Its streaming events belong to the row it writes to: no lookup per publish.
            with streaming_row(run.session_id, turn.meta.pk):
                _run(turn)
    except SummaryCancelled:  # an abort while a compaction was being written
        coalescer.flush()
        lifecycle.finish(run, RunStatus.ABORTED, abort_when=" during compaction", sink=sink, fields=book.pending())
        run.refresh_from_db()
    except Exception as exc:  # a failed run is recorded, never silent
        logger.exception("run %s failed", run.run_id)
        coalescer.flush()
        if turn is not None:
            _store_results_safely(turn)
        _fail_in_flight(run)
        lifecycle.finish(run, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}", sink=sink, fields=book.pending())
        run.refresh_from_db()
    finally:
        read_pace.reset(pacing)
        read_wake.reset(waking)
        coalescer.flush()
        if turn is not None:
            _write_trace(turn)
    # The normal way out: the in-memory run is the row as the turn's writes left it.
    return run


def _write_trace(turn: Turn) -> None:
    """The run's trace records (runtime/runs/traces.py); a failure to write them is logged, the
    run's outcome stands."""
    calls, tools = list(turn.trace.calls), list(turn.trace.tools)
    try:
        traces.write(turn.trace)
    except Exception:  # noqa: BLE001 - observability never fails a run
        logger.exception("run %s: writing its trace failed", turn.run.run_id)
    telemetry.export_run(turn.run, calls, tools)  # OpenTelemetry, when configured; never raises


def _prepare(run: AgentRun, sink: Coalescer, control: RunControl, book: RunBook) -> Turn:
    agent = run.agent
    model = agent.model
    if run.model_name:
        model = ModelConfig.objects.get(name=run.model_name)
    # The session's own store, whatever the agent's setting says now (it only chooses
    # where *new* sessions go).
    provider, meta = open_session(run.session_id)
    workspace = workspace_for(agent, meta)  # per session / user / shared
    cwd, roots = str(workspace.cwd), [str(r) for r in workspace.roots]
    tools = agent_tools(agent, model=model)  # a model without tool support: none, nor their guidelines
    return Turn(
        run=run,
        agent=agent,
        model=model,
        provider=provider,
        sink=sink,
        control=control,
        tools=tools,
        cwd=cwd,
        roots=roots,
        # The session owner's custom instructions (their chat page settings) follow the agent's
        # prompt, then the run's own (an OpenAI client's instructions).
        system_prompt=build_system_prompt(
            agent, tools.projection, cwd=cwd, user_instructions=instructions_for(meta.user_id), instructions=run.instructions
        ),
        meta=meta,
        book=book,
    )


# --------------------------------------------------------------------------- the loop


def user_message(text: str, images: list | None = None) -> dict:
    """A prompt as Pi's user message: its text, then its attachments — documents (text blocks
    with their wrapper, runs/documents.py) and images."""
    content: list[dict] = [{"type": "text", "text": text}]
    for image in images or []:
        if image.get("type") == "text":
            content.append({"type": "text", "text": image["text"]})
        else:
            content.append({"type": "image", "data": image["data"], "mimeType": image["mimeType"]})
    return {"role": "user", "content": content, "timestamp": now_ms()}


def _run(turn: Turn) -> None:

    run = turn.run
    if run.question and run.question.get("kind") == "approval":
        # Resumed after an approval request: the decision goes into the tree, then the
        # round's calls that had not run yet run (or get the refusal) as if never stopped.
        if _after_round(turn, _resume_approval(turn), counted=False):
            return
    elif run.question:
        # Resumed after a question (runs/questions.py): its prompt is in the tree and the
        # ``ask_user`` call waits for its result, which the answer (or expiry) gives now.
        _settle_question(turn)
    elif run.prompt_entry_id:
        # A regenerated answer (runs/prompts.py::session_regenerate) starts from a user entry
        # already in the tree (its prompt_entry_id, the leaf): no new user entry, and no
        # compaction first — its entry would come between the message and the new answer,
        # which would then not be a sibling of the others (the end of the run compacts).
        pass
    else:
        maybe_auto_compact(turn)
        # Stored with the reply's in-flight entry (one write), and ``prompt_entry_id`` in the
        # same transaction: once the prompt is in the tree a reaper will not carry it again.
        turn.pending_prompt = user_message(run.prompt, run.images)
    # Whether the run's cancel flag was read since the last step: the claim read it, and
    # the check after a round of tool calls reads it with the steers (one query each).
    checked = True
    while True:
        if not checked and turn.control.check():
            _store_pending_prompt(turn)
            _finish(turn, RunStatus.ABORTED, abort_when=" before the next model call")
            return
        checked = False
        final = _stream_assistant(turn)
        stop = final.get("stopReason")
        if not turn.overflow_retried and llm.is_context_overflow(final, turn.call_spec.context_window):

            turn.overflow_retried = True
            compact_session(turn.session_id, agent=turn.agent, model=turn.model, cancel=turn.control.cancel)
            turn.meta = turn.provider.get_session(turn.session_id)  # compaction wrote without the turn's copy
            continue
        if stop == "aborted":
            close_open_tool_calls(turn.provider, turn.session_id, text=ABORTED_TOOL_TEXT)
            _finish(turn, RunStatus.ABORTED, abort_when="")
            return
        if stop == "error":
            if retries.should_retry(turn, final):
                continue  # the broken reply stays in the tree; the context leaves it out
            _finish(turn, RunStatus.FAILED, error=final.get("errorMessage") or "the model returned an error")
            return
        retries.call_succeeded(turn)
        calls = [b for b in final.get("content") or [] if b.get("type") == "toolCall"]
        if calls and stop == "toolUse":
            steered = _run_tool_calls(turn, calls)
            if _after_round(turn, steered):
                return
            checked = not steered
            continue
        # A queued follow-up goes first; without one, Pi's threshold check at the end of the
        # run, while the run is still running (so it can be aborted, and no new run writes
        # to the tree meanwhile). When no compaction is due (no query to know), the
        # completing transaction itself finds a follow-up, if any.
        follow_up = None
        if auto_compaction_due(turn):
            follow_up = lifecycle.next_input(run)
            if follow_up is None:
                # The turn itself succeeded: a summarizer failure here is logged, the next
                # prompt retries.
                try:
                    maybe_auto_compact(turn)
                except SummaryCancelled:
                    raise
                except SummaryFailed as exc:
                    logger.warning("run %s: compaction after the turn failed: %s", run.run_id, exc)
        if follow_up is None:
            if not turn.control.cancelled:
                maybe_auto_title(turn)  # after the answer is stored and streamed; never fatal
            turn.sink.flush()
            follow_up = lifecycle.next_input(run, or_complete=True, sink=turn.sink.sink, meta=turn.meta, fields=turn.book.pending())
            if follow_up is None:
                turn.book.written()
                return
        _deliver(turn, [follow_up])


def _after_round(turn: Turn, steered: list[RunInput], *, counted: bool = True) -> bool:
    """After a round of tool calls: an abort, a question or approval to wait on, the steers to
    deliver, the round limit. True when the run stops here (finished, or parked)."""
    run = turn.run
    if turn.control.cancelled:
        if turn.question is not None:
            _store_results(turn)  # the round's held result first: the rest get the error
            close_open_tool_calls(turn.provider, turn.session_id, text=ABORTED_TOOL_TEXT)
        _finish(turn, RunStatus.ABORTED, abort_when="")
        return True
    if counted:
        run.rounds += 1
        turn.book.set(rounds=run.rounds)  # written with the next reply's opening
    if turn.question is not None:
        question, turn.question = turn.question, None
        if not steered:
            if _park(turn, question):
                return True  # waiting: no thread, no worker until the answer resumes it
            close_open_tool_calls(turn.provider, turn.session_id, text=ABORTED_TOOL_TEXT)
            asked = "waited for an approval" if question.get("kind") == "approval" else "asked a question"
            _finish(turn, RunStatus.ABORTED, abort_when=f" while it {asked}")
            return True
        # The user steered instead of answering: the message is the answer.
        if question.get("kind") == "approval":
            _store_results(turn)
            close_open_tool_calls(turn.provider, turn.session_id, text=APPROVAL_STEERED_TEXT)
        else:
            _append_result(turn, question["toolCallId"], "ask_user", ToolResult.error(QUESTION_STEERED_TEXT))
    _deliver(turn, steered)
    if run.rounds >= turn.agent.max_tool_rounds and not steered:
        _finish(turn, RunStatus.FAILED, error=f"stopped after {turn.agent.max_tool_rounds} tool rounds (the agent's max_tool_rounds)")
        return True
    return False


def _deliver(turn: Turn, inputs: list[RunInput]) -> None:
    """Append queued prompts to the tree, then mark them consumed: a crash in between
    delivers one twice (the reaper carries it again), never drops it."""
    if inputs:
        _store_results(turn)  # a steer follows the round's last tool result
    for item in inputs:
        with acting_as(user_id=item.user_id):  # a queued prompt's entry names who sent it
            turn.provider.append_message(turn.session_id, user_message(item.text, item.images), meta=turn.meta)
        turn.sink.flush()
        lifecycle.consume(turn.run, item, sink=turn.sink.sink)


def _store_results(turn: Turn) -> None:
    """The tool result still held for the next reply's write, on its own (the run goes on
    otherwise: an abort, a steer, the round limit, a failure)."""
    results, turn.pending_results = turn.pending_results, []
    for message, _, _ in results:
        turn.provider.append_message(turn.session_id, message, meta=turn.meta)
        crash_point("after_tool")


def _store_results_safely(turn: Turn) -> None:
    try:
        _store_results(turn)
    except Exception:
        logger.exception("could not store the last tool result of run %s", turn.run.run_id)


def _tool_result_final(turn: Turn, call_id: str, result: ToolResult) -> None:
    turn.emit(se.tool_result_final(tool_call_id=call_id, text=result.text_output(), is_error=result.is_error))


def _store_pending_prompt(turn: Turn) -> None:
    """The prompt into the tree when no reply follows it (an abort before the first call)."""
    prompt, turn.pending_prompt = turn.pending_prompt, None
    if prompt is not None:
        pk = turn.run.pk
        turn.provider.append_message(
            turn.session_id,
            prompt,
            meta=turn.meta,
            also=lambda entry: AgentRun.objects.filter(pk=pk).update(prompt_entry_id=entry["id"]),
        )


def _stream_assistant(turn: Turn) -> dict:
    provider, session_id = turn.provider, turn.session_id
    placeholder = {
        "role": "assistant",
        "content": [],
        "api": turn.spec.api,  # the LLM layer's one table (API_BY_KIND)
        "provider": turn.spec.provider_name,
        "model": turn.spec.model_id,
        "usage": llm.empty_usage(),
        "stopReason": "stop",
        "timestamp": now_ms(),
    }
    prompt = turn.pending_prompt
    results = turn.pending_results
    before = [prompt] if prompt is not None else [message for message, _, _ in results]
    run_pk = turn.run.pk

    book = turn.book

    marks: dict = {}

    def opened(entries: list[dict]) -> None:  # in the write's transaction
        # The run's bookkeeping since its last write rides in this UPDATE (RunBook).
        marks.clear()
        marks["in_flight_entry_id"] = entries[-1]["id"]
        if prompt is not None:
            marks["prompt_entry_id"] = entries[0]["id"]
        update_rows(AgentRun, {"pk": run_pk}, {**book.pending(), **marks})

    entry = provider.begin_in_flight(session_id, placeholder, before=before, meta=turn.meta, also=opened)
    book.written()  # committed: the in-memory run shows it
    for name, value in marks.items():
        setattr(turn.run, name, value)
    turn.pending_prompt, turn.pending_results = None, []
    if results and prompt is None:
        crash_point("after_tool")
    entry_id = entry["id"]
    # The context the reply answers: the path up to the entry just opened (no read of the row).
    ctx = provider.build_context(session_id, entry["parentId"] or ROOT, meta=turn.meta)
    requested_level = ctx.thinking_level if ctx.thinking_level else turn.agent.thinking_level
    messages = llm_messages(ctx.messages)
    tool_definitions = turn.tools.projection.tool_definitions() if turn.model.supports_tools else []
    _read_approvals(turn)
    if turn.approval_mode == "plan_only":  # changing tools are not offered at all
        tool_definitions = [d for d in tool_definitions if not approvals.refused_in_plan_mode(_registered(d["name"]), {})]
    sampling = turn.run.sampling or {}  # an OpenAI client's sampling parameters (runtime/llm/sampling.py)

    attempts: list[traces.Attempt] = []

    def request_for(candidate: failover.Candidate) -> llm.LlmRequest:
        # Thinking by capability: the level the model accepts, the clamp in the run's notes.
        clamp = clamp_thinking(candidate.spec, requested_level)
        if clamp.changed:
            add_note(turn, "thinking", clamp.describe(candidate.name), model=candidate.name, requested=clamp.requested, level=clamp.level)
        request = llm.LlmRequest(
            system_prompt=turn.system_prompt,
            messages=messages,
            tools=tool_definitions if candidate.config.supports_tools else [],
            thinking_level=clamp.level,
            max_tokens=capped_max_tokens(candidate.config.max_output_tokens, sampling),
            sampling=sampling,
            session_id=turn.session_id,
        )
        attempts.append(traces.attempt(candidate, request, entry["parentId"] or ""))  # the call's record, by reference
        return request

    crash_point("stream_start")
    turn.emit(se.assistant_stream_start(entry_id=entry_id, run_id=turn.run.run_id))
    final: dict | None = None
    last_checkpoint = time.monotonic()
    save_every = settings.NETA_STREAM_SAVE_SECONDS
    partial: dict | None = None
    streaming = None
    turn.call_transient = False
    # The model is waited on without a database connection: a pooled one goes back to its
    # pool here and after each checkpoint (infra/mysql_backend), so a process running many
    # turns holds the few its threads use at once.
    release_connection()
    try:
        for candidate, event in failover.stream(turn, request_for, cancel=turn.control.cancel):
            if candidate is not streaming:
                streaming, partial = candidate, None  # a fallback took the call: nothing of the failed one is kept
                turn.call_spec = candidate.spec
                turn.call_candidate = candidate
            partial = event.partial or partial
            if event.type in FIRST_TOKEN_EVENTS and attempts and attempts[-1].first_token is None:
                attempts[-1].first_token = timezone.now()
                if turn.run.first_token_at is None:  # the run's first token: written with the reply's end
                    turn.run.first_token_at = attempts[-1].first_token
                    turn.book.set(first_token_at=turn.run.first_token_at)
            _forward(turn, entry_id, event)
            if event.type in ("done", "error"):
                final = event.message
                turn.call_transient = event.type == "error" and event.transient
            elif partial is not None and time.monotonic() - last_checkpoint >= save_every:
                provider.update_in_flight_entry(session_id, entry_id, partial, meta=turn.meta)
                release_connection()
                last_checkpoint = time.monotonic()
    except Exception as exc:  # the LLM layer promises not to raise; be safe anyway
        logger.exception("stream failed")
        final = {**(partial or placeholder), "stopReason": "error", "errorMessage": f"{type(exc).__name__}: {exc}"}
    if final is None:
        final = {**(partial or placeholder), "stopReason": "aborted" if turn.control.cancelled else "error"}
        final.setdefault("errorMessage", "the model stream ended without a final message")
    turn.sink.flush()
    crash_point("finalize")
    stop = final.get("stopReason")
    status = "aborted" if stop == "aborted" else "failed" if stop == "error" else "completed"
    usage = final.get("usage") or {}
    stored = provider.finalize_in_flight(session_id, entry_id, final, status=status, meta=turn.meta)
    traces.record_model_calls(turn.trace, turn.run, session_id, attempts, final=final, entry_id=entry_id)
    # The usage (and the cleared in-flight mark) go to the run row with its next write, with
    # the model that answered (what the run's pages and the costs name, whatever the agent
    # says later).
    turn.book.add_usage(usage)
    answered = streaming.name if streaming is not None else (turn.answering.name if turn.answering else turn.model.name)
    if answered != turn.run.answered_model:
        turn.run.answered_model = answered
        turn.book.set(answered_model=answered)
    turn.emit(se.assistant_stream_end(entry_id=entry_id, stop_reason=stop, run_id=turn.run.run_id))
    turn.emit(_reply_context_stats(turn, final))
    return stored["message"]


def _forward(turn: Turn, entry_id: str, event) -> None:
    kind = event.type
    if kind in ("text_delta", "thinking_delta"):
        field = "text" if kind == "text_delta" else "thinking"
        block = _block(event)
        # Where the delta starts in its block, so a client can merge it with a checkpoint.
        offset = max(0, len(block.get(field) or "") - len(event.delta))
        turn.emit(se.assistant_stream_delta(entry_id=entry_id, content_index=event.content_index, kind=field, offset=offset, delta=event.delta))
    elif kind == "toolcall_start":
        block = _block(event)
        turn.emit(se.tool_call_started(entry_id=entry_id, content_index=event.content_index, tool_call_id=block.get("id"), name=block.get("name")))
    elif kind == "toolcall_delta":
        turn.emit(se.tool_call_delta(entry_id=entry_id, content_index=event.content_index, delta=event.delta))
    elif kind == "toolcall_end":
        turn.emit(se.tool_call_completed(entry_id=entry_id, content_index=event.content_index, tool_call=_block(event)))


def _block(event) -> dict:
    content = (event.partial or {}).get("content") or []
    index = event.content_index
    return content[index] if index is not None and 0 <= index < len(content) else {}


def llm_messages(messages: list[dict]) -> list[dict]:
    """What the model is sent: ``convert_to_llm``, minus incomplete turns.

    Assistant messages that ended in ``error`` or ``aborted`` are not replayed
    (their tool results go with them): they are kept in the tree for the record.
    """
    converted = convert_to_llm(messages)
    dropped_calls: set[str] = set()
    out = []
    for message in converted:
        if message.get("role") == "assistant" and message.get("stopReason") in ("error", "aborted"):
            dropped_calls.update(b.get("id") for b in message.get("content") or [] if b.get("type") == "toolCall")
            continue
        if message.get("role") == "toolResult" and message.get("toolCallId") in dropped_calls:
            continue
        out.append(message)
    return out


def _tool_context(turn: Turn, call_id: str) -> ToolContext:
    def progress(partial: ToolResult) -> None:
        turn.emit(se.tool_result_progress(tool_call_id=call_id, text=partial.text_output()))

    # The delegate tools (runtime/subagents/) host children for this run and this call;
    # ``ask_user`` may ask: this loop can park the run on its question.
    extras = {"turn": turn, "tool_call_id": call_id, "can_wait": True}
    return turn.tools.context(roots=turn.roots, cwd=turn.cwd, cancel=turn.control.cancel, on_progress=progress, extras=extras)


def _run_tool_calls(turn: Turn, calls: list[dict]) -> list[RunInput]:
    """Run each call and append its result; returns steering inputs that arrived meanwhile."""
    steered: list[RunInput] = []
    for index, call in enumerate(calls):
        call_id, name = call.get("id") or "", call.get("name") or ""
        args = call.get("arguments") or {}
        decided, turn.approved = (turn.approved, None) if turn.approved and turn.approved.get("toolCallId") == call_id else (None, turn.approved)
        started = timezone.now()
        if turn.control.cancelled:
            result, outcome = ToolResult.error(ABORTED_TOOL_TEXT), "skipped"
        elif steered:
            result, outcome = ToolResult.error(SKIPPED_FOR_STEER_TEXT), "skipped"
        elif decided is not None and decided.get("outcome") != "allowed":
            result = ToolResult.error(approvals.denial_text(decided), details={"approval": approvals.decision_data(decided)})
            outcome = "denied"
        elif decided is None and (refusal := _approval_gate(turn, call)) is not None:
            if refusal is WAIT:
                break  # the run waits for a person; this call and the rest of the round run after
            result, outcome = refusal, "refused"
        else:
            # Through the projection: a tool it does not make effective gets an error result.
            release_connection()  # a command may run for minutes: not on a held connection
            result = turn.tools.execute(name, args, _tool_context(turn, call_id))
            outcome = "error" if result.is_error else "ok"
        turn.trace.tools.append(traces.tool_record(turn.run, call_id, name, args, started, outcome))
        pending = (result.details or {}).get("pendingQuestion") if name == ASK_USER and not result.is_error else None
        if pending is not None:
            if turn.question is None:
                turn.question = {"toolCallId": call_id, **pending}
                continue  # its result is the answer, written when the run resumes
            result = ToolResult.error(ONE_QUESTION_TEXT)
        message = result.to_pi_tool_result(call_id, name)
        if index == len(calls) - 1:
            # The round's last result goes with the next reply's opening, which follows at
            # once (one write instead of two); whatever the run does instead stores it first.
            # Its stream event goes now (a projection, like the deltas: the tree event of
            # the entry follows its commit), so the client sees the result at once.
            turn.pending_results = [(message, call_id, result)]
            _tool_result_final(turn, call_id, result)
            break
        turn.provider.append_message(turn.session_id, message, meta=turn.meta)
        crash_point("after_tool")
        _tool_result_final(turn, call_id, result)
        if not steered and index < len(calls) - 1:
            steered = lifecycle.pending_inputs(turn.run, RunInputKind.STEER)
    if steered:
        turn.control.check()
    else:  # the steers and the cancel flag in one read
        steered, cancel = lifecycle.steer_or_cancel(turn.run)
        if cancel:
            turn.control.cancel.set()
    return steered


def _append_result(turn: Turn, call_id: str, name: str, result: ToolResult) -> None:
    turn.provider.append_message(turn.session_id, result.to_pi_tool_result(call_id, name), meta=turn.meta)
    crash_point("after_tool")
    turn.emit(se.tool_result_final(tool_call_id=call_id, text=result.text_output(), is_error=result.is_error))


# --------------------------------------------------------------------------- approvals


def _read_approvals(turn: Turn) -> None:
    """The approval mode in force (the agent's, tightened by the session's) and the session's
    rules, from the active path as it is now (runs/approvals.py)."""
    path = turn.provider.get_active_path(turn.session_id, meta=turn.meta)
    state = approvals.read_path(path)
    turn.approval_mode = approvals.effective_mode(turn.tools.tool_policy.approval, state)
    turn.approval_rules = state.rules


def _registered(name: str):
    try:
        return get_tool(name)
    except UnknownTool:
        return None


def _approval_gate(turn: Turn, call: dict) -> ToolResult | None:
    """None: the call runs. ``WAIT``: it waits for a person (``turn.question`` holds the
    request). Another result: the call is refused with it."""
    name, args = call.get("name") or "", call.get("arguments") or {}
    mode = turn.approval_mode
    if mode == "auto" or name in approvals.NEVER_ASK:
        return None
    tool = _registered(name)
    if mode == "plan_only":
        return ToolResult.error(PLAN_ONLY_TEXT) if tool is not None and approvals.refused_in_plan_mode(tool, args) else None
    if not approvals.needs_approval(mode, tool, name, args, turn.approval_rules):
        return None
    if turn.question is not None:
        return ToolResult.error(ONE_WAIT_TEXT)
    preview = preview_for_approval(tool, _tool_context(turn, call.get("id") or ""), args) if tool is not None else None
    turn.question = approvals.request_for(call, mode=mode, cwd=turn.cwd, preview=preview)
    return WAIT


def open_tool_calls(provider: SessionTreeProvider, session_id: str, *, meta=None) -> list[dict]:
    """The tool calls of the active path's last assistant message that have no result yet
    (none once a user message follows it)."""
    answered: set[str] = set()
    for entry in reversed(provider.get_active_path(session_id, meta=meta)):
        if entry.get("type") != "message":
            continue
        message = entry["message"]
        if message.get("role") == "toolResult":
            answered.add(message.get("toolCallId"))
            continue
        if message.get("role") != "assistant":
            return []
        return [b for b in message.get("content") or [] if b.get("type") == "toolCall" and b.get("id") not in answered]
    return []


def _resume_approval(turn: Turn) -> list[RunInput]:
    """On a run resumed after an approval request: record the decision in the tree, then run
    the round's calls that had no result yet, the decided one first."""
    question = turn.run.question or {}
    pending = open_tool_calls(turn.provider, turn.session_id, meta=turn.meta)
    if question.get("outcome") not in ("allowed", "denied", "expired") or not pending or pending[0].get("id") != question.get("toolCallId"):
        close_open_tool_calls(turn.provider, turn.session_id, text="Tool call aborted: the approval was never decided.")
        turn.meta = turn.provider.get_session(turn.session_id)
        return []
    turn.provider.append_custom_entry(turn.session_id, custom_type=approvals.DECISION_TYPE, data=approvals.decision_data(question))
    turn.meta = turn.provider.get_session(turn.session_id)  # written without the turn's copy
    _read_approvals(turn)  # an "allow for this session" counts for the rest of the round too
    turn.approved = question
    return _run_tool_calls(turn, pending)


# --------------------------------------------------------------------------- questions (ask_user)


def _park(turn: Turn, question: dict) -> bool:
    """The run waits on ``question``: ``running`` → ``waiting`` (False: an abort came first)."""
    asked = now_ms()
    timeout = int(settings.NETA_ASK_USER_TIMEOUT_SECONDS)
    question = {**question, "askedAt": asked, "expiresAt": asked + timeout * 1000, "timeoutSeconds": timeout}
    _store_results(turn)  # the round's held result: no reply follows it before the answer
    book = turn.book.pending()
    if book:  # the run's bookkeeping (RunBook) before it stops owning the row
        update_rows(AgentRun, {"pk": turn.run.pk}, book)
        turn.book.written()
    turn.sink.flush()
    return lifecycle.wait(turn.run, question, sink=turn.sink.sink)


def question_result(question: dict) -> ToolResult:
    """The ``ask_user`` call's result for a settled question (answered or expired)."""
    if question.get("outcome") == "answered":
        details = {"answer": question.get("answer"), "selected": question.get("selected") or [], "answeredBy": question.get("answeredBy")}
        return ToolResult.text(f"The user answered: {question.get('answerText', '')}", details=details)
    minutes = max(1, round(int(question.get("timeoutSeconds") or 0) / 60))
    return ToolResult.error(
        f"The user did not answer within {minutes} minute(s); the question expired. Go on without the answer, "
        "or ask again later.",
        details={"expired": True},
    )


def _settle_question(turn: Turn) -> None:
    """On a resumed run: the waited-on call's result, unless it is in the tree already."""
    question = turn.run.question or {}
    call_id = question.get("toolCallId")
    if not call_id or question.get("outcome") not in ("answered", "expired"):
        close_open_tool_calls(turn.provider, turn.session_id, text="Tool call aborted: the question was never answered.")
        return
    for entry in reversed(turn.provider.get_active_path(turn.session_id)):
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "toolResult" and message.get("toolCallId") == call_id:
            return
        if entry.get("type") == "message" and message.get("role") == "assistant":
            break
    _append_result(turn, call_id, ASK_USER, question_result(question))


def close_open_tool_calls(provider: SessionTreeProvider, session_id: str, *, text: str) -> list[dict]:
    """Give every tool call of the active path's last assistant message that has no
    result yet an error result saying ``text`` (Pi's rule: each call gets a result, so
    the next context is valid). Used by the abort path, after an unexpected error, and
    by the reaper for a run whose process died mid-tool. Returns the results appended.

    Only when the messages after that assistant message are its tool results: once a
    user message follows, the turn was already closed."""
    appended = []
    for block in open_tool_calls(provider, session_id):
        result = ToolResult.error(text).to_pi_tool_result(block.get("id") or "", block.get("name") or "")
        appended.append(provider.append_message(session_id, result))
    return appended


# --------------------------------------------------------------------------- run bookkeeping


def _finish(turn: Turn, status: str, *, error: str = "", abort_when: str | None = None) -> None:
    """End the run (``lifecycle.finish``) after the stream events sent so far."""
    _store_results(turn)
    turn.sink.flush()
    if lifecycle.finish(turn.run, status, error=error, abort_when=abort_when, sink=turn.sink.sink, meta=turn.meta, fields=turn.book.pending()):
        turn.book.written()


def _fail_in_flight(run: AgentRun) -> None:
    """After an unexpected error: store the in-flight entry as failed, if one is open."""
    try:
        provider = provider_for_session(run.session_id)
        in_flight = provider.get_in_flight(run.session_id)
        if in_flight is not None:
            provider.finalize_in_flight(run.session_id, in_flight["id"], status="failed")
        close_open_tool_calls(provider, run.session_id, text="Tool call aborted: the run failed before it finished.")
    except Exception:
        logger.exception("could not finalize the in-flight entry of run %s", run.run_id)


def _reply_context_stats(turn: Turn, final: dict) -> se.SessionContextStats:
    """The ``session_context_stats`` stream event: what the model's reply says it used
    (its usage), not the kernel's estimate of the path (``provider.context_stats``)."""
    usage = final.get("usage") or {}
    tokens = int(usage.get("totalTokens") or 0) or sum(int(usage.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite"))
    spec = turn.call_spec  # the model that answered (a fallback, runtime/runs/failover.py)
    return se.session_context_stats(tokens=tokens, context_window=spec.context_window, model=spec.model_id)
