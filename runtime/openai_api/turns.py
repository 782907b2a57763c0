"""A turn as the tree holds it: the user message, and the assistant replies the run wrote for it
until the next user message. What every answer renders (the final response of a request, a
``GET /v1/responses/{id}``) is read from here, never from the stream.

From any reply of a turn, the turn is found in the session's index: back along the parents to
the user message, forward along *first* children (in stored order: a run writes its next
entry before anyone can branch from it) through tool results and the turn's other entries
until the next user message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.models import ACTIVE_RUN_STATUSES, AgentRun
from runtime.openai_api.conversation import message_text, user_parts
from sessions_tree.ids import iso_to_ms
from sessions_tree.providers import provider_for_session

USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


@dataclass
class Turn:
    session_id: str
    agent: str
    prompt: dict | None  # the user message entry
    replies: list[dict] = field(default_factory=list)  # the assistant message entries, in order
    running: bool = False  # the session's run is still writing this turn
    # The turn's last entry: its last reply, or what the run wrote after it (a title, a
    # compaction). The next turn continues here, so they stay on its path.
    tail_id: str | None = None

    @property
    def first_id(self) -> str | None:
        return self.replies[0]["id"] if self.replies else None

    @property
    def last_id(self) -> str | None:
        return self.replies[-1]["id"] if self.replies else None

    @property
    def messages(self) -> list[dict]:
        return [r["message"] for r in self.replies]

    def usage(self) -> dict:
        """Pi's usage summed over the turn's model calls."""
        total = dict.fromkeys(USAGE_KEYS, 0)
        for message in self.messages:
            usage = message.get("usage") or {}
            for key in USAGE_KEYS:
                value = usage.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[key] += int(value)
        return total

    def stop(self) -> tuple[str, str | None]:
        """(status, error): ``completed``, ``incomplete`` (the output limit), ``failed``,
        ``cancelled`` (aborted), ``in_progress``; from the last reply's stop reason."""
        if self.running or not self.replies:
            return ("in_progress", None) if self.running else ("failed", "the run ended before it answered")
        message = self.replies[-1]["message"]
        stop = message.get("stopReason")
        if stop == "stop":
            return "completed", None
        if stop == "length":
            return "incomplete", None
        if stop == "aborted":
            return "cancelled", message.get("errorMessage") or "the run was aborted"
        if stop == "toolUse":
            return "failed", "the run ended during a tool call"
        return "failed", message.get("errorMessage") or "the model failed"

    def created_at(self) -> int:
        """When the turn began (its user message; else its first reply), in epoch seconds."""
        for entry in (self.prompt, *self.replies[:1]):
            if entry is not None:
                ms = (entry.get("message") or {}).get("timestamp")
                if not isinstance(ms, (int, float)) or isinstance(ms, bool):
                    ms = iso_to_ms(entry.get("timestamp"))
                if ms:
                    return int(ms // 1000)
        return 0

    def prompt_text(self) -> str:
        return user_parts(self.prompt["message"])[0] if self.prompt else ""

    def text(self) -> str:
        return "\n\n".join(t for t in (message_text(m) for m in self.messages) if t)


def _is(entry: dict, role: str) -> bool:
    message = entry.get("message")
    return entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == role


def turn_of(session_id: str, entry_id: str) -> Turn | None:
    """The turn ``entry_id`` (an assistant reply) belongs to; None when it is no assistant
    message of the session."""
    provider = provider_for_session(session_id)
    meta = provider.get_session(session_id)
    index = provider.index_for(session_id)
    record = index.by_id.get(entry_id)
    if record is None and entry_id == meta.in_flight_entry_id:
        return _streaming(provider, meta, index)  # the turn's reply being written now
    if record is None or not _is(record.entry, "assistant"):
        return None
    back = []
    prompt = None
    for entry in reversed(index.path_entries(entry_id)):
        if _is(entry, "user"):
            prompt = entry
            break
        if _is(entry, "assistant"):
            back.append(entry)
    replies = back[::-1]
    first_child: dict = {}
    for other in index.by_id.values():
        first_child.setdefault(other.parent_id, other)
    tail = entry_id
    cursor = first_child.get(entry_id)
    while cursor is not None:
        entry = cursor.entry
        if _is(entry, "user"):
            break
        if _is(entry, "assistant"):
            replies.append(entry)
        tail = cursor.id
        cursor = first_child.get(cursor.id)
    running = False
    if meta.in_flight_entry_id and meta.in_flight_payload:
        # The run streams the turn's next reply (its parent is the turn's last entry).
        in_flight = provider.get_in_flight(session_id)
        running = in_flight is not None and in_flight.get("parentId") == tail
    if not running and replies and replies[-1]["message"].get("stopReason") == "toolUse":
        running = AgentRun.objects.filter(session_id=session_id, status__in=ACTIVE_RUN_STATUSES).exists()
    return Turn(session_id=session_id, agent=meta.agent, prompt=prompt, replies=replies, running=running, tail_id=tail)


def _streaming(provider, meta, index) -> Turn | None:
    """The turn whose reply is in flight: its replies so far, the in-flight one last (running)."""
    in_flight = provider.get_in_flight(meta.session_id)
    if in_flight is None or not _is(in_flight, "assistant"):
        return None
    parent = in_flight.get("parentId")
    replies, prompt = [in_flight], None
    if parent is not None and parent in index.by_id:
        for entry in reversed(index.path_entries(parent)):
            if _is(entry, "user"):
                prompt = entry
                break
            if _is(entry, "assistant"):
                replies.insert(0, entry)
    return Turn(session_id=meta.session_id, agent=meta.agent, prompt=prompt, replies=replies, running=True, tail_id=in_flight["id"])


def run_of(turn: Turn) -> AgentRun | None:
    """The run that wrote ``turn``: of the runs of its user message, the last one created
    before its first reply (a regenerated answer is another run of the same message)."""
    if turn.prompt is None:
        return None
    runs = AgentRun.objects.filter(session_id=turn.session_id, prompt_entry_id=turn.prompt["id"]).order_by("-created_at", "-pk")
    first = turn.replies[0] if turn.replies else None
    at = iso_to_ms(first.get("timestamp")) if first is not None else None
    for run in runs[:20]:
        if at is None or run.created_at.timestamp() * 1000 <= at + 1:
            return run
    return None
