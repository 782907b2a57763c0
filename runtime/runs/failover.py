"""Model failover for one model call (docs/llm.md, "Failover").

A call goes to the run's model first. When it fails **before any output** — the LLM layer's
``error`` event says ``retryable`` (connection refused, timeout, 408/409/429, 5xx, 529
overloaded, after that model's own retries) and nothing was streamed — the call moves to
the agent's next fallback model (``Agent.fallback_models``, in order). A context overflow
before any output moves to the first fallback not yet tried whose context window is
larger; without one it stays the turn's error (and the turn compacts, as before). Each
model is asked at most once per call; once any delta was streamed, an error is the call's
error (a second model would repeat what the page already shows).

Within a run, a fallback that answered goes first for the run's next calls (a primary in a
bad minute is not waited for on every tool round); the next run starts from the run's model
again. No ``model_change`` entry is written: in Pi it records a selection, and the
context's model already follows the last assistant message, whose ``provider``/``model``/
``api`` say which model answered. The run's notes say
"answered by X after Y failed: reason" (``runtime/runs/notes.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from runtime import llm
from runtime.agents.specs import ModelUnavailable, model_spec
from runtime.models import ModelConfig
from runtime.runs.notes import add_note

logger = logging.getLogger(__name__)

REASON_CHARS = 200


@dataclass(frozen=True)
class Candidate:
    """A model a call may be made with: its row and its spec (key resolved)."""

    config: ModelConfig
    spec: llm.ModelSpec

    @property
    def name(self) -> str:
        return self.config.name


@dataclass
class CallPlan:
    """The models one call may still go to, in order, and what happened to those tried."""

    chain: list[Candidate]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # fallbacks that cannot be used now, and why
    failures: list[tuple[str, str]] = field(default_factory=list)  # (model, reason), in the order tried
    tried: set[str] = field(default_factory=set)
    extended: bool = False  # the agent's fallbacks are in the chain

    def next_after(self, current: Candidate, message: dict, *, retryable: bool) -> tuple[Candidate | None, str]:
        """The model to ask after ``current`` failed with ``message`` before any output
        (None: the failure stays the call's), and why."""
        self.tried.add(current.name)
        reason = _short(message.get("errorMessage") or "failed")
        overflow = llm.is_context_overflow(message, current.spec.context_window)
        left = [c for c in self.chain if c.name not in self.tried]
        if overflow:
            bigger = [c for c in left if c.spec.context_window > current.spec.context_window]
            return (bigger[0] if bigger else None), f"context overflow ({reason})"
        if retryable:
            return (left[0] if left else None), reason
        return None, reason


def short_reason(text: str) -> str:
    """An error message on one line, at most REASON_CHARS long."""
    return _short(text)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def fallbacks(turn) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """The agent's fallback models that can be called now (in order), and the ones that
    cannot with why (gone, disabled, no key). Read once per run, on the first failure."""
    cached = getattr(turn, "_fallbacks", None)
    if cached is not None:
        return cached
    names = [n for n in (turn.agent.fallback_models or []) if isinstance(n, str)]
    rows = {m.name: m for m in ModelConfig.objects.filter(name__in=names)} if names else {}
    usable: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    for name in names:
        row = rows.get(name)
        if row is None:
            skipped.append((name, "no such model"))
            continue
        try:
            usable.append(Candidate(row, model_spec(row)))
        except ModelUnavailable as exc:
            skipped.append((name, str(exc)))
    turn._fallbacks = (usable, skipped)
    return turn._fallbacks


def plan_call(turn) -> tuple[CallPlan, Candidate]:
    """The call's plan and the model it starts with: the run's model, or the fallback that
    answered the run's last call."""
    primary = Candidate(turn.model, turn.spec)
    plan = CallPlan(chain=[primary])
    first = getattr(turn, "answering", None) or primary
    return plan, first


def _extend(turn, plan: CallPlan) -> None:
    """Add the agent's fallbacks to the chain (once): resolved only when a call failed."""
    if plan.extended:
        return
    plan.extended = True
    usable, skipped = fallbacks(turn)
    names = {c.name for c in plan.chain}
    sticky = getattr(turn, "answering", None)
    for candidate in ([sticky] if sticky is not None and sticky.name not in names else []) + usable:
        if candidate.name not in names:
            plan.chain.append(candidate)
            names.add(candidate.name)
    plan.skipped = list(skipped)


def stream(turn, build_request: Callable[[Candidate], llm.LlmRequest], *, cancel) -> Iterator[tuple[Candidate, llm.StreamEvent]]:
    """``llm.stream`` for one call, with failover: yields ``(the model streaming, event)``;
    the ``error`` event of a model that failed before any output is not yielded when
    another model takes the call. Ends with exactly one ``done`` or ``error`` event."""
    plan, candidate = plan_call(turn)
    while True:
        output = False
        switch_to: Candidate | None = None
        for event in llm.stream(candidate.spec, build_request(candidate), cancel=cancel):
            if event.type == "error" and not output and not (event.message or {}).get("content"):
                stop = (event.message or {}).get("stopReason")
                if stop == "error" and (event.retryable or llm.is_context_overflow(event.message, candidate.spec.context_window)):
                    _extend(turn, plan)  # the fallbacks are read only when one may take the call
                if stop == "error":
                    switch_to, reason = plan.next_after(candidate, event.message, retryable=event.retryable)
                    if switch_to is not None:
                        plan.failures.append((candidate.name, reason))
                        logger.warning("run %s: model %s failed (%s); trying %s", turn.run.run_id, candidate.name, reason, switch_to.name)
                        add_note(turn, "failover", f"{candidate.name} failed: {reason}; trying {switch_to.name}", keep=False)
                        break
                    if plan.failures or (event.retryable and plan.skipped):  # a failover was or would have been tried
                        plan.failures.append((candidate.name, reason))
            if event.type not in ("start", "done", "error"):
                output = True
            if event.type in ("done", "error"):
                _summarize(turn, plan, candidate, event)
            yield candidate, event
        if switch_to is None:
            return
        candidate = switch_to


def _summarize(turn, plan: CallPlan, candidate: Candidate, event: llm.StreamEvent) -> None:
    if not plan.failures:
        return
    failed = "; ".join(f"{name} failed: {reason}" for name, reason in plan.failures)
    if plan.skipped:
        failed += "".join(f" ({name} skipped: {why})" for name, why in plan.skipped)
    names = [n for n, _ in plan.failures]
    stop = (event.message or {}).get("stopReason")
    if event.type == "done":
        turn.answering = candidate if candidate.name != turn.model.name else None
        add_note(turn, "failover", f"answered by {candidate.name} after {failed}", model=candidate.name, failed=names)
    elif stop == "aborted":
        add_note(turn, "failover", f"aborted while {candidate.name} answered after {failed}", model=candidate.name, failed=names)
    elif candidate.name not in names:  # the fallback failed once its output had begun
        add_note(turn, "failover", f"{candidate.name} took over after {failed}, then failed: {_short(event.message.get('errorMessage') or '')}", model=candidate.name, failed=names)
    else:
        add_note(turn, "failover", f"no model answered: {failed}", failed=names)
