"""Entry builders: plain dicts with the keys in the order Pi writes them.

Pi serializes entries with ``JSON.stringify``, so key order is part of the file
format (pi-session-format.md §2). Each builder returns a new dict in that order;
optional fields passed as ``None`` are left out, as Pi leaves out ``undefined``.
The two Neta types (``subagent_batch``, ``subagent_result``) follow the same
pattern: ``type, id, parentId, timestamp``, then their fields. Pi treats unknown
types as transparent tree nodes, so files with them stay openable by Pi.

No validation beyond the shape: ids are strings, ``parent_id`` is a string or
None, ``timestamp`` an ISO string. Bad types raise TypeError.
"""

from __future__ import annotations

from sessions_tree.jsonl import js_trim

__all__ = [
    "CONTEXT_TYPES",
    "ENTRY_TYPES",
    "HEADER_TYPE",
    "MISSING",
    "NETA_ENTRY_TYPES",
    "PI_ENTRY_TYPES",
    "SETTINGS_TYPES",
    "branch_summary_entry",
    "compaction_entry",
    "custom_entry",
    "custom_message_entry",
    "label_entry",
    "message_entry",
    "model_change_entry",
    "session_header",
    "session_info_entry",
    "subagent_batch_entry",
    "subagent_result_entry",
    "thinking_level_change_entry",
]

HEADER_TYPE = "session"
PI_ENTRY_TYPES = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)
NETA_ENTRY_TYPES = frozenset({"subagent_batch", "subagent_result"})
ENTRY_TYPES = PI_ENTRY_TYPES | NETA_ENTRY_TYPES
# Entry types that can put a message into the LLM context (§8 step 4).
CONTEXT_TYPES = frozenset({"message", "custom_message", "branch_summary", "compaction"})
# Entry types that change the context's settings.
SETTINGS_TYPES = frozenset({"thinking_level_change", "model_change"})


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()  # "argument not given" where None is a legitimate value


def _check(name: str, value, *types) -> None:
    if not isinstance(value, types):
        wanted = " or ".join("None" if t is type(None) else t.__name__ for t in types)
        raise TypeError(f"{name} must be {wanted}, not {type(value).__name__} ({value!r})")


def _base(kind: str, id: str, parent_id: str | None, timestamp: str) -> dict:
    _check("id", id, str)
    _check("parent_id", parent_id, str, type(None))
    _check("timestamp", timestamp, str)
    return {"type": kind, "id": id, "parentId": parent_id, "timestamp": timestamp}


def session_header(*, session_id: str, timestamp: str, cwd: str, parent_session: str | None = None, version: int = 3) -> dict:
    """``{"type":"session","version":3,"id",timestamp,cwd[,parentSession]}``."""
    _check("session_id", session_id, str)
    _check("timestamp", timestamp, str)
    _check("cwd", cwd, str)
    header = {"type": HEADER_TYPE, "version": version, "id": session_id, "timestamp": timestamp, "cwd": cwd}
    if parent_session is not None:
        _check("parent_session", parent_session, str)
        header["parentSession"] = parent_session
    return header


def message_entry(*, id: str, parent_id: str | None, timestamp: str, message: dict) -> dict:
    """A ``message`` entry; ``message`` is the Pi AgentMessage dict (kept as is, not copied)."""
    _check("message", message, dict)
    entry = _base("message", id, parent_id, timestamp)
    entry["message"] = message
    return entry


def thinking_level_change_entry(*, id: str, parent_id: str | None, timestamp: str, thinking_level: str) -> dict:
    entry = _base("thinking_level_change", id, parent_id, timestamp)
    entry["thinkingLevel"] = thinking_level
    return entry


def model_change_entry(*, id: str, parent_id: str | None, timestamp: str, provider: str, model_id: str) -> dict:
    entry = _base("model_change", id, parent_id, timestamp)
    entry["provider"] = provider
    entry["modelId"] = model_id
    return entry


def compaction_entry(
    *,
    id: str,
    parent_id: str | None,
    timestamp: str,
    summary: str,
    first_kept_entry_id: str,
    tokens_before: int,
    details=None,
    from_hook: bool | None = None,
) -> dict:
    """``summary, firstKeptEntryId, tokensBefore[, details][, fromHook]`` (Pi writes
    ``fromHook: false`` for its own compactions, ``true`` for extension-made ones)."""
    entry = _base("compaction", id, parent_id, timestamp)
    entry["summary"] = summary
    entry["firstKeptEntryId"] = first_kept_entry_id
    entry["tokensBefore"] = tokens_before
    if details is not None:
        entry["details"] = details
    if from_hook is not None:
        entry["fromHook"] = from_hook
    return entry


def branch_summary_entry(
    *,
    id: str,
    parent_id: str | None,
    timestamp: str,
    from_id: str,
    summary: str,
    details=None,
    from_hook: bool | None = None,
) -> dict:
    """``fromId, summary[, details][, fromHook]``; ``fromId`` is the attach point
    (``parent_id``, or ``"root"`` when None), as Pi's ``branchWithSummary`` writes it."""
    entry = _base("branch_summary", id, parent_id, timestamp)
    entry["fromId"] = from_id
    entry["summary"] = summary
    if details is not None:
        entry["details"] = details
    if from_hook is not None:
        entry["fromHook"] = from_hook
    return entry


def custom_entry(*, id: str, parent_id: str | None, timestamp: str, custom_type: str, data=MISSING) -> dict:
    """Pi writes ``type, customType, data?, id, parentId, timestamp`` (type fields first)."""
    base = _base("custom", id, parent_id, timestamp)
    entry = {"type": "custom", "customType": custom_type}
    if data is not MISSING:
        entry["data"] = data
    entry["id"], entry["parentId"], entry["timestamp"] = base["id"], base["parentId"], base["timestamp"]
    return entry


def custom_message_entry(
    *, id: str, parent_id: str | None, timestamp: str, custom_type: str, content, display: bool, details=None
) -> dict:
    """``type, customType, content, display, details?, id, parentId, timestamp``;
    ``content`` is a string or a list of text/image blocks."""
    _check("content", content, str, list)
    base = _base("custom_message", id, parent_id, timestamp)
    entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display}
    if details is not None:
        entry["details"] = details
    entry["id"], entry["parentId"], entry["timestamp"] = base["id"], base["parentId"], base["timestamp"]
    return entry


def label_entry(*, id: str, parent_id: str | None, timestamp: str, target_id: str, label: str | None = None) -> dict:
    """Set (``label`` truthy) or clear (``None``: key omitted, or ``""``) a label."""
    _check("target_id", target_id, str)
    entry = _base("label", id, parent_id, timestamp)
    entry["targetId"] = target_id
    if label is not None:
        _check("label", label, str)
        entry["label"] = label
    return entry


def session_info_entry(*, id: str, parent_id: str | None, timestamp: str, name: str) -> dict:
    """The session name; stored trimmed (JavaScript ``trim()``) as Pi's ``appendSessionInfo`` does."""
    _check("name", name, str)
    entry = _base("session_info", id, parent_id, timestamp)
    entry["name"] = js_trim(name)
    return entry


def subagent_batch_entry(
    *, id: str, parent_id: str | None, timestamp: str, batch_id: str, mode: str, runs: list, metadata: dict | None = None
) -> dict:
    """Neta: one subagent call (``mode`` single/parallel/chain) and its ``runs``; the host
    adds ``metadata`` (runs, bounded events, final results) when the batch is finalized."""
    entry = _base("subagent_batch", id, parent_id, timestamp)
    entry["batchId"] = batch_id
    entry["mode"] = mode
    entry["runs"] = runs
    if metadata is not None:
        _check("metadata", metadata, dict)
        entry["metadata"] = metadata
    return entry


def subagent_result_entry(
    *,
    id: str,
    parent_id: str | None,
    timestamp: str,
    batch_id: str,
    run_id: str,
    agent: str,
    status: str,
    content,
    details=None,
    is_error: bool = False,
    metadata: dict | None = None,
) -> dict:
    """Neta: the result of one subagent run of a batch (``metadata``: e.g. bounded process events)."""
    entry = _base("subagent_result", id, parent_id, timestamp)
    entry["batchId"] = batch_id
    entry["runId"] = run_id
    entry["agent"] = agent
    entry["status"] = status
    entry["content"] = content
    if details is not None:
        entry["details"] = details
    entry["isError"] = is_error
    if metadata is not None:
        _check("metadata", metadata, dict)
        entry["metadata"] = metadata
    return entry
