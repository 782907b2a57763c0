"""Retrying a model call whose stream broke after its output began (docs/llm.md, "Retries").

The LLM layer retries a failed call only while nothing was streamed, and failover hands a
call that failed before any output to the next model (``failover.py``). A failure after
the output began — an ``overloaded_error`` event mid-stream, a 5xx or 429 on a call the
turn loop repeats, a connection dropped or reset — used to end the run. Now, as Pi's
auto-retry does:

- the broken reply stays in the tree, finalized with ``stopReason: "error"`` and its
  ``errorMessage`` (the file keeps what happened); the context leaves it out, as Pi's does
  for every errored or aborted assistant message (``turn.llm_messages``);
- the call is made again on the same context after ``NETA_LLM_RETRY_BASE_MS`` × 1, 2, 4 …
  (Pi: 2, 4, 8 s), at most ``NETA_LLM_RETRIES`` times (3) in a row; the wait ends at once
  when the run is aborted;
- once the retries are spent, the agent's next fallback model after the one that failed
  takes the call (with its own retries); with none left the run fails with the last error.

Only failures that may pass count (``StreamEvent.transient``: overloaded, 5xx, 408/409/429,
timeouts, connection errors, a stream that ended early); a context overflow or a 4xx ends
the call as before. Each retry and each failover is a note on the run (``notes.py``): kept
in the run's record, sent to the page as ``run_note``.
"""

from __future__ import annotations

import logging

from django.conf import settings

from runtime.runs import failover
from runtime.runs.notes import add_note

logger = logging.getLogger(__name__)


def delay_seconds(attempt: int) -> float:
    """The wait before retry number ``attempt`` (1-based): base × 2^(attempt−1)."""
    return settings.NETA_LLM_RETRY_BASE_MS * (2 ** (attempt - 1)) / 1000


def should_retry(turn, final: dict) -> bool:
    """After a call ended in ``final`` with ``stopReason: "error"``: whether the turn makes
    it again (after a wait, or with the next fallback model). False: the run fails."""
    if not getattr(turn, "call_transient", False):
        return False
    if not (final.get("content") or turn.retry_attempt):
        # Nothing was streamed: the LLM layer already retried the call and failover already
        # asked every model it could; only a retry already under way goes on.
        return False
    current = turn.call_candidate
    name = current.name if current is not None else turn.model.name
    reason = failover.short_reason(final.get("errorMessage") or "failed")
    if turn.retry_attempt < settings.NETA_LLM_RETRIES:
        turn.retry_attempt += 1
        wait = delay_seconds(turn.retry_attempt)
        text = f"{name} failed: {reason}; retry {turn.retry_attempt}/{settings.NETA_LLM_RETRIES} in {wait:g} s"
        logger.warning("run %s: %s", turn.run.run_id, text)
        add_note(turn, "retry", text, model=name, attempt=turn.retry_attempt, delayMs=int(wait * 1000))
        # The same model again (the run's, or the fallback that was answering).
        turn.answering = current if current is not None and current.name != turn.model.name else None
        turn.control.cancel.wait(wait)  # an abort ends the wait; the loop's next check ends the run
        return True
    successor = next_model(turn, name)
    if successor is None:
        if turn.retry_attempt:
            add_note(turn, "retry", f"{name} failed after {turn.retry_attempt} retries: {reason}", model=name, attempt=turn.retry_attempt)
        return False
    add_note(
        turn, "failover", f"{name} failed after {turn.retry_attempt} retries: {reason}; {successor.name} takes over",
        model=successor.name, failed=[name],
    )  # fmt: skip
    turn.answering = successor
    turn.retry_attempt = 0
    turn.retry_failed.add(name)
    return True


def next_model(turn, failed: str):
    """The model after ``failed`` in the run's chain (its model, then the agent's usable
    fallbacks), not one already given up on in this run; None when there is none."""
    usable, _ = failover.fallbacks(turn)
    chain = [failover.Candidate(turn.model, turn.spec), *usable]
    names = [c.name for c in chain]
    start = names.index(failed) + 1 if failed in names else len(names)
    for candidate in chain[start:]:
        if candidate.name not in turn.retry_failed and candidate.name != failed:
            return candidate
    return None


def call_succeeded(turn) -> None:
    """A call ended without error: say so when it took retries, and start counting again."""
    if turn.retry_attempt:
        name = turn.call_candidate.name if turn.call_candidate is not None else turn.model.name
        add_note(turn, "retry", f"{name} answered after {turn.retry_attempt} retries", model=name, attempt=turn.retry_attempt)
    turn.retry_attempt = 0
