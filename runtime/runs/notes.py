"""A run's notes: what it did on its own that its user should know (``AgentRun.notes``).

Kinds: ``failover`` (a model call answered by a fallback, runtime/runs/failover.py, or
handed to one after its retries, runtime/runs/retries.py), ``retry`` (a call made again after
its stream broke, retries.py) and ``thinking`` (the requested thinking level clamped to what the model accepts). Each note
is kept in the run's row — written with the next UPDATE the turn makes of the row anyway
(``RunBook``), so a note costs no statement of its own — and sent to the page at once as
a ``run_note`` streaming event (the chat page shows the latest beside the run's state).
"""

from __future__ import annotations

from runtime.realtime import stream_events as se
from sessions_tree.ids import now_ms

MAX_NOTES = 50  # a run's row keeps at most this many (a long tool loop failing over every call)


def add_note(turn, kind: str, text: str, *, keep: bool = True, **details) -> dict | None:
    """Record ``text`` on ``turn``'s run (once: the same kind and text again is not repeated).
    ``keep=False``: only sent to the page (a step the kept note sums up later)."""
    run = turn.run
    if not keep:
        turn.emit(se.run_note(run_id=run.run_id, kind=kind, text=text))
        return None
    notes = list(run.notes or [])
    if any(n.get("kind") == kind and n.get("text") == text for n in notes):
        return None
    note = {"kind": kind, "text": text, "at": now_ms(), **details}
    notes = [*notes, note][-MAX_NOTES:]
    run.notes = notes
    turn.book.set(notes=notes)
    turn.emit(se.run_note(run_id=run.run_id, kind=kind, text=text))
    return note
