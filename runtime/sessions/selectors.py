"""Reading sessions: the snapshot a client starts from, the revision a write answers with.

(Who may read or write a session is ``runtime.sessions.access``.)"""

from __future__ import annotations

import os

from django.db.models import Q

from runtime.models import Agent
from runtime.runs.selectors import run_state
from sessions_tree import jsonl
from sessions_tree.models import AgentSession, SessionEntry
from sessions_tree.providers import get_provider, provider_for_session


def current_revision(session_id: str) -> int:
    """The session's revision now (0 when it is gone): what a write answers with, so the
    client knows which tree event its change became."""
    return AgentSession.objects.filter(session_id=session_id).values_list("revision", flat=True).first() or 0


def session_snapshot(session_id: str, *, entry_limit: int | None = None) -> dict:
    """The kernel's snapshot with the runtime's part of ``runtimeContext`` filled in:
    ``contextWindow`` (the agent's model) and ``runState``.

    Tree events keep ``model``/``thinkingLevel``/``tokenEstimate`` current; the run
    state moves with ``run_state`` streaming events.
    """
    provider = provider_for_session(session_id)
    snapshot = provider.get_snapshot(session_id, entry_limit=entry_limit)
    agent_name = snapshot["session"].get("agent")
    agent = Agent.objects.select_related("model").filter(name=agent_name).first() if agent_name else None
    context = dict(snapshot["runtimeContext"])
    context["contextWindow"] = agent.model.context_window if agent is not None else None
    context["runState"] = run_state(session_id)
    snapshot["runtimeContext"] = context
    return snapshot


SEARCH_SCAN_SESSIONS = 200  # the most recently updated sessions a search looks into
SEARCH_MAX_RESULTS = 50
SEARCH_MAX_FILE_BYTES = 8 * 1024 * 1024  # a session file larger than this is searched by title only
SEARCH_SNIPPET_CHARS = 120


def _message_text(entry: dict) -> str:
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _snippet(text: str, at: int, length: int) -> str:
    start = max(0, at - SEARCH_SNIPPET_CHARS // 3)
    end = min(len(text), start + SEARCH_SNIPPET_CHARS)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def _content_hit(entries, needle: str) -> tuple[str, str] | None:
    """The first user/assistant message of ``entries`` whose text holds ``needle``
    (lowercased): (entry id, snippet)."""
    for entry in entries:
        text = _message_text(entry)
        at = text.lower().find(needle)
        if at >= 0:
            return entry.get("id"), _snippet(text, at, len(needle))
    return None


def _raw_candidates(needle: str) -> tuple[str, ...]:
    """What ``needle`` looks like inside stored JSON text (as typed, and JSON-escaped)."""
    escaped = jsonl.dumps(needle)[1:-1].lower()
    return (needle,) if escaped == needle else (needle, escaped)


def search_sessions(sessions, query: str, *, limit: int = SEARCH_MAX_RESULTS) -> list[dict]:
    """Sessions of ``sessions`` (a queryset the caller may read) whose title or whose user
    and assistant messages hold ``query`` (case-insensitive), most recently updated first.

    Bounded: titles match in every session; the text of the ``SEARCH_SCAN_SESSIONS`` most
    recently updated sessions is looked into,
    at most ``limit`` results; session files over ``SEARCH_MAX_FILE_BYTES`` match by title
    only. Each result: the session, ``match`` (``title`` or ``content``), and for a content
    match ``entryId`` and ``snippet``.
    """
    needle = query.strip().lower()
    candidates = list(sessions.order_by("-updated_at", "-pk")[:SEARCH_SCAN_SESSIONS])
    hits: dict[int, dict] = {}
    rows_needles = _raw_candidates(needle)
    mysql = [m for m in candidates if m.provider == "mysql" and needle not in (m.title or "").lower()]
    if mysql:
        match = Q()
        for raw in rows_needles:
            match |= Q(payload__icontains=raw)
        rows = (
            SessionEntry.objects.filter(session__in=mysql, type="message", role__in=("user", "assistant"))
            .filter(match)
            .order_by("session_id", "seq")
            .values_list("session_id", "payload")[: SEARCH_SCAN_SESSIONS * 5]
        )
        for session_pk, payload in rows:
            if session_pk in hits:
                continue
            hit = _content_hit([jsonl.loads(payload)], needle)
            if hit:
                hits[session_pk] = {"match": "content", "entryId": hit[0], "snippet": hit[1]}
    results = []
    for meta in candidates:
        if len(results) >= limit:
            break
        if needle in (meta.title or "").lower():
            results.append({"session": meta, "match": "title", "entryId": None, "snippet": None})
            continue
        found = hits.get(meta.pk)
        if found is None and meta.provider == "file":
            found = _file_hit(meta, needle, rows_needles)
        if found is not None:
            results.append({"session": meta, **found})
    if len(results) < limit:
        # Titles are matched in every session (one indexed-column query), not only the scanned ones.
        older = sessions.filter(title__icontains=needle).exclude(pk__in=[m.pk for m in candidates]).order_by("-updated_at", "-pk")
        results += [{"session": meta, "match": "title", "entryId": None, "snippet": None} for meta in older[: limit - len(results)]]
    return results


def _file_hit(meta, needle: str, raw_needles: tuple[str, ...]) -> dict | None:
    path = meta.session_file
    try:
        if not path or os.path.getsize(path) > SEARCH_MAX_FILE_BYTES:
            return None
        with open(path, "rb") as handle:
            raw = handle.read().decode("utf-8", "replace").lower()
    except OSError:
        return None
    if not any(n in raw for n in raw_needles):
        return None  # most files stop here, unparsed
    hit = _content_hit(get_provider("file").list_entries(meta.session_id), needle)
    return {"match": "content", "entryId": hit[0], "snippet": hit[1]} if hit else None
