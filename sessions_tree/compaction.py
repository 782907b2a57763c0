"""Compaction as pure logic: Pi's cut point, what to summarize, the summarizer
requests and the entry that results (pi-session-format.md §10).

No LLM is called here. The runtime asks :func:`prepare_compaction` what to do,
sends the :class:`SummaryRequest` objects of :func:`compaction_requests` to the
agent's model, and hands the reply texts to :func:`compaction_result`, whose
dict goes into ``append_compaction`` (``fromHook`` False)::

    prep = prepare_compaction(path_entries, settings)      # None: see compaction_blocked_reason
    requests = compaction_requests(prep, custom_instructions=..., reasoning=level_or_None)
    replies = {r.kind: llm(r) for r in requests}            # "history" and/or "turn_prefix"
    fields = compaction_result(prep, replies)               # summary, firstKeptEntryId, ...

For the same path, settings and replies every value equals Pi 0.73.1's
(``prepareCompaction``/``compact``), including the prompt texts byte for byte;
the tests prove it against Pi's fixtures and the Pi oracle.

Where Pi would throw on malformed entries (a ``message`` entry without a message
object, tool-call ``arguments`` that are not an object) Neta carries on: such
values count as empty. Path entries must form a path (root first); cycles are the
path builder's business (:mod:`sessions_tree.path`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from sessions_tree.context import (
    context_from_path,
    convert_to_llm,
    date_ms,
    estimate_context_usage,
    estimate_tokens,
    js_length,
)
from sessions_tree.jsonl import UNDEFINED, dumps, js_to_string
from sessions_tree.path import js_same, js_truthy

__all__ = [
    "ALREADY_COMPACTED",
    "HISTORY_PROMPT",
    "HISTORY_UPDATE_PROMPT",
    "TURN_PREFIX_PROMPT",
    "NOTHING_TO_COMPACT",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "CompactionPreparation",
    "CompactionSettings",
    "CutPoint",
    "FileOps",
    "SummaryRequest",
    "compaction_blocked_reason",
    "compaction_requests",
    "compaction_result",
    "context_tokens_from_usage",
    "conversation_text",
    "file_operations_suffix",
    "find_cut_point",
    "find_turn_start",
    "message_from_entry",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
    "summary_reasoning",
    "threshold_context_tokens",
]

# Why Pi refuses a manual /compact (AgentSession.compact's error messages).
ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"

# --------------------------------------------------------------------------- prompts
# These texts are part of the format: Pi sends them verbatim, and a Neta summary
# must be asked for with the same words to be comparable with Pi's.

SUMMARIZATION_SYSTEM_PROMPT = (
    "You are a context summarization assistant. Your task is to read a conversation between a user and an AI "
    "coding assistant, then produce a structured summary following the exact format specified.\n\n"
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. "
    "ONLY output the structured summary."
)

_PRESERVE = "Keep each section concise. Preserve exact file paths, function names, and error messages."

HISTORY_PROMPT = f"""The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

{_PRESERVE}"""

HISTORY_UPDATE_PROMPT = f"""The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

{_PRESERVE}"""

TURN_PREFIX_PROMPT = """This is the PREFIX of a turn that was too large to keep. The SUFFIX (recent work) is retained.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What did the user ask for in this turn?]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [Information needed to understand the retained recent work]

Be concise. Focus on what's needed to understand the kept suffix."""

NO_PRIOR_HISTORY = "No prior history."
SPLIT_TURN_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
TOOL_RESULT_MAX_CHARS = 2000  # UTF-16 units of a tool result kept in a serialized conversation

# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's ``compaction`` settings (defaults as Pi's ``DEFAULT_COMPACTION_SETTINGS``)."""

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def __post_init__(self):
        if type(self.enabled) is not bool:
            raise TypeError(f"enabled must be a bool, not {self.enabled!r}")
        for name in ("reserve_tokens", "keep_recent_tokens"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"{name} must be an int, not {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, not {value}")

    def to_pi(self) -> dict:
        return {
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
        }


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """Pi's threshold rule: compact when enabled and ``tokens > window - reserve``."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


def context_tokens_from_usage(usage: dict) -> float:
    """Pi's ``calculateContextTokens``: ``totalTokens``, or the sum of its four parts when 0/missing."""
    total = usage.get("totalTokens")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and js_truthy(total):
        return total
    parts = (usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite"))
    return sum(p for p in parts if isinstance(p, (int, float)) and not isinstance(p, bool))


def threshold_context_tokens(
    assistant_message: dict, *, path_entries: list[dict], context_messages: list
) -> float | None:
    """The token count Pi's automatic threshold check compares (``_checkCompaction``
    case 2), or None when Pi skips the check.

    ``assistant_message`` is the run's last assistant message, ``path_entries``
    the current root-to-leaf path and ``context_messages`` the in-memory context
    (after the message). Skipped when the message is not newer than the latest
    compaction on the path; an ``error`` message has no usable usage, so the
    context is estimated from the last good usage (skipped if there is none or if
    it predates that compaction). The overflow case and the aborted-message rule
    are the caller's (they need the model).
    """
    compaction_ms = None  # the latest compaction's time (None: none, or an invalid date)
    for entry in reversed(path_entries):
        if entry.get("type") == "compaction":
            compaction_ms = date_ms(entry.get("timestamp", UNDEFINED))
            break
    if _at_or_before(assistant_message.get("timestamp"), compaction_ms):
        return None
    if assistant_message.get("stopReason") == "error":
        estimate = estimate_context_usage(context_messages)
        if estimate.last_usage_index is None:
            return None
        usage_message = context_messages[estimate.last_usage_index]
        if usage_message.get("role") == "assistant" and _at_or_before(usage_message.get("timestamp"), compaction_ms):
            return None
        return estimate.tokens
    usage = assistant_message.get("usage")
    return context_tokens_from_usage(usage if type(usage) is dict else {})


def _at_or_before(timestamp, ms) -> bool:
    # JavaScript ``timestamp <= ms`` with NaN/undefined comparing false.
    if ms is None or not isinstance(timestamp, (int, float)) or isinstance(timestamp, bool):
        return False
    return timestamp <= ms


def summary_reasoning(model_reasoning: bool, thinking_level) -> str | None:
    """The ``reasoning`` Pi requests for a compaction summary: the session's thinking
    level when the model can reason and the level is set and not ``off``; else None."""
    if model_reasoning and isinstance(thinking_level, str) and thinking_level and thinking_level != "off":
        return thinking_level
    return None


# --------------------------------------------------------------------------- file operations


def _utf16_key(text: str):
    return text.encode("utf-16-be", "surrogatepass")


def _js_sorted(values: Iterable[str]) -> list[str]:
    """JavaScript's default ``Array.prototype.sort`` for strings (UTF-16 code units)."""
    values = list(values)
    if all(v.isascii() for v in values):
        return sorted(values)
    return sorted(values, key=_utf16_key)


@dataclass
class FileOps:
    """Files touched by ``read``/``write``/``edit`` tool calls (Pi's ``FileOperations``)."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_from_message(self, message) -> None:
        """Pi's ``extractFileOpsFromMessage``: the string ``arguments.path`` of every
        ``read``/``write``/``edit`` tool call of an assistant message."""
        if type(message) is not dict or message.get("role") != "assistant":
            return
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if type(block) is not dict or block.get("type") != "toolCall":
                continue
            if "arguments" not in block or "name" not in block:
                continue
            arguments = block["arguments"]
            if type(arguments) is not dict:
                continue
            path = arguments.get("path")
            if type(path) is not str or not path:
                continue
            name = block["name"]
            if name == "read":
                self.read.add(path)
            elif name == "write":
                self.written.add(path)
            elif name == "edit":
                self.edited.add(path)

    def add_from_details(self, details) -> None:
        """Carry over an earlier summary's ``details``: ``readFiles`` were read,
        ``modifiedFiles`` count as edited (so a modified file stays modified).
        Non-string items are ignored."""
        if type(details) is not dict:
            return
        read_files = details.get("readFiles")
        if isinstance(read_files, list):
            self.read.update(f for f in read_files if type(f) is str)
        modified_files = details.get("modifiedFiles")
        if isinstance(modified_files, list):
            self.edited.update(f for f in modified_files if type(f) is str)

    def file_lists(self) -> tuple[list[str], list[str]]:
        """Pi's ``computeFileLists``: ``(readFiles, modifiedFiles)``, sorted like
        JavaScript; a file both read and modified is only in ``modifiedFiles``."""
        modified = self.edited | self.written
        return _js_sorted(self.read - modified), _js_sorted(modified)

    def details(self) -> dict:
        """``{"readFiles": [...], "modifiedFiles": [...]}``, the entry's ``details``."""
        read_files, modified_files = self.file_lists()
        return {"readFiles": read_files, "modifiedFiles": modified_files}


def file_operations_suffix(read_files: list[str], modified_files: list[str]) -> str:
    """What Pi appends to a summary: ``<read-files>``/``<modified-files>`` blocks,
    each only when non-empty, nothing when both are empty."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)


# --------------------------------------------------------------------------- entries -> messages


def message_from_entry(entry: dict):
    """The message an entry contributes to a summary, or None (Pi's
    ``getMessageFromEntry``): a ``message`` entry's message, ``custom_message`` as a
    ``custom`` message, ``branch_summary`` as ``branchSummary`` (even when its
    summary is empty), ``compaction`` as ``compactionSummary``; other types None.
    Created messages take ``timestamp`` = the entry's time in ms (None for an
    invalid date, as JavaScript's NaN is written as null)."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if js_truthy(message) else None
    if kind == "custom_message":
        keys = ("customType", "content", "display", "details")
        return _created("custom", entry, keys)
    if kind == "branch_summary":
        return _created("branchSummary", entry, ("summary", "fromId"))
    if kind == "compaction":
        return _created("compactionSummary", entry, ("summary", "tokensBefore"))
    return None


def _created(role: str, entry: dict, keys) -> dict:
    message = {"role": role}
    for key in keys:
        if key in entry:
            message[key] = entry[key]
    message["timestamp"] = date_ms(entry.get("timestamp", UNDEFINED))
    return message


def _compaction_messages(entries: list[dict]) -> list:
    out = []
    for entry in entries:
        if entry.get("type") == "compaction":
            continue
        message = message_from_entry(entry)
        if message is not None:
            out.append(message)
    return out


# --------------------------------------------------------------------------- cut point

_CUT_ROLES = frozenset({"bashExecution", "custom", "branchSummary", "compactionSummary", "user", "assistant"})
_TURN_START_ROLES = frozenset({"user", "bashExecution"})


def _role(entry: dict):
    message = entry.get("message")
    return message.get("role") if type(message) is dict else None


def _is_cut_point(entry: dict) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return _role(entry) in _CUT_ROLES
    return kind in ("branch_summary", "custom_message")


@dataclass(frozen=True)
class CutPoint:
    """Where a compaction cuts: entries from ``first_kept_entry_index`` on are kept.
    ``turn_start_index`` is the start of the turn the cut splits (-1 if none)."""

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool


def find_turn_start(path_entries: list[dict], entry_index: int, start: int) -> int:
    """Pi's ``findTurnStartIndex``: the nearest entry at or before ``entry_index``
    (down to ``start``) that starts a turn (a user or bashExecution message, a
    ``branch_summary`` or ``custom_message`` entry); -1 if none."""
    for i in range(entry_index, start - 1, -1):
        entry = path_entries[i]
        kind = entry.get("type")
        if kind in ("branch_summary", "custom_message"):
            return i
        if kind == "message" and _role(entry) in _TURN_START_ROLES:
            return i
    return -1


def find_cut_point(path_entries: list[dict], start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Pi's ``findCutPoint`` over ``path_entries[start:end]``.

    Walks back from the newest entry summing the estimated tokens of ``message``
    entries; where the sum reaches ``keep_recent_tokens`` it cuts at the first
    valid cut point at or after that entry (never a tool result). If the sum is
    never reached, or no cut point follows, it keeps from the first cut point.
    The cut then moves back over directly preceding non-message entries (settings,
    labels, custom entries ...), stopping at a message, a compaction or ``start``.
    """
    if not 0 <= start <= end <= len(path_entries):
        raise ValueError(f"bad range [{start}, {end}) for a path of {len(path_entries)} entries")
    cut_points = [i for i in range(start, end) if _is_cut_point(path_entries[i])]
    if not cut_points:
        return CutPoint(first_kept_entry_index=start, turn_start_index=-1, is_split_turn=False)
    cut = cut_points[0]
    accumulated = 0
    for i in range(end - 1, start - 1, -1):
        entry = path_entries[i]
        if entry.get("type") != "message":
            continue
        accumulated += estimate_tokens(entry.get("message"))
        if accumulated >= keep_recent_tokens:
            for c in cut_points:
                if c >= i:
                    cut = c
                    break
            break
    while cut > start:
        kind = path_entries[cut - 1].get("type")
        if kind in ("compaction", "message"):
            break
        cut -= 1
    entry = path_entries[cut]
    if entry.get("type") == "message" and _role(entry) == "user":
        return CutPoint(first_kept_entry_index=cut, turn_start_index=-1, is_split_turn=False)
    turn_start = find_turn_start(path_entries, cut, start)
    return CutPoint(first_kept_entry_index=cut, turn_start_index=turn_start, is_split_turn=turn_start != -1)


# --------------------------------------------------------------------------- preparation


@dataclass
class CompactionPreparation:
    """Pi's ``CompactionPreparation`` plus where it came from.

    ``messages_to_summarize`` are the messages (stored dicts, or created ones for
    custom messages and branch summaries) from the start of the summarized range
    up to the turn start (split turn) or the cut; ``turn_prefix_messages`` those
    of the split turn before the cut. ``previous_summary`` is the summary of the
    last compaction on the path (None without one); its kept messages are
    summarized again, with the old summary handed to the model.
    """

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: float
    previous_summary: str | None
    file_ops: FileOps
    messages_to_summarize: list
    turn_prefix_messages: list
    settings: CompactionSettings
    cut_point: CutPoint
    boundary_start: int

    @property
    def needs_turn_prefix(self) -> bool:
        return self.is_split_turn and len(self.turn_prefix_messages) > 0


def prepare_compaction(
    path_entries: list[dict], settings: CompactionSettings = CompactionSettings()
) -> CompactionPreparation | None:
    """Pi's ``prepareCompaction`` for a root-to-leaf path.

    None when the leaf is a compaction or the cut entry has no id (an empty
    path); :func:`compaction_blocked_reason` says which. A small session still
    prepares (Pi then asks the model to summarize what little there is).
    """
    if path_entries and path_entries[-1].get("type") == "compaction":
        return None
    prev_index = -1
    for i in range(len(path_entries) - 1, -1, -1):
        if path_entries[i].get("type") == "compaction":
            prev_index = i
            break
    previous_summary = None
    boundary_start = 0
    prev = None
    if prev_index >= 0:
        prev = path_entries[prev_index]
        previous_summary = prev.get("summary")
        boundary_start = prev_index + 1
        first_kept = prev.get("firstKeptEntryId", UNDEFINED)
        for i, entry in enumerate(path_entries):
            if js_same(entry.get("id", UNDEFINED), first_kept):
                boundary_start = i
                break
    tokens_before = estimate_context_usage(context_from_path(path_entries).messages).tokens
    cut = find_cut_point(path_entries, boundary_start, len(path_entries), settings.keep_recent_tokens)
    if cut.first_kept_entry_index >= len(path_entries):
        return None
    first_kept_id = path_entries[cut.first_kept_entry_index].get("id")
    if not js_truthy(first_kept_id):
        return None  # an unmigrated (v1) entry: Pi refuses too
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    messages = _compaction_messages(path_entries[boundary_start:history_end])
    prefix = (
        _compaction_messages(path_entries[cut.turn_start_index : cut.first_kept_entry_index])
        if cut.is_split_turn
        else []
    )
    file_ops = FileOps()
    if prev is not None and not js_truthy(prev.get("fromHook")) and js_truthy(prev.get("details")):
        file_ops.add_from_details(prev["details"])
    for message in messages:
        file_ops.add_from_message(message)
    for message in prefix:
        file_ops.add_from_message(message)
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        messages_to_summarize=messages,
        turn_prefix_messages=prefix,
        settings=settings,
        cut_point=cut,
        boundary_start=boundary_start,
    )


def compaction_blocked_reason(
    path_entries: list[dict], settings: CompactionSettings = CompactionSettings()
) -> str | None:
    """Why a manual compaction of this path cannot run (Pi's error texts):
    ``"Already compacted"`` when the leaf is a compaction, ``"Nothing to compact
    (session too small)"`` when Pi's preparation returns nothing else; None when
    it can run."""
    if path_entries and path_entries[-1].get("type") == "compaction":
        return ALREADY_COMPACTED
    if prepare_compaction(path_entries, settings) is None:
        return NOTHING_TO_COMPACT
    return None


# --------------------------------------------------------------------------- serialization


def _js_entries(obj: dict):
    """``Object.entries(obj)`` order: integer-like keys ascending, then the rest."""
    index_keys = [
        k for k in obj if k and k.isascii() and k.isdigit() and (k == "0" or k[0] != "0") and int(k) <= 2**32 - 2
    ]
    if not index_keys:
        return list(obj.items())
    index_keys.sort(key=int)
    first = set(index_keys)
    return [(k, obj[k]) for k in index_keys] + [(k, v) for k, v in obj.items() if k not in first]


def _join_text(values) -> str:
    # Array.prototype.join: null/undefined become "", anything else String(value).
    return "".join("" if v is None or v is UNDEFINED else js_to_string(v) for v in values)


def _text_blocks(content) -> list:
    if not isinstance(content, list):
        return []
    return [b.get("text", UNDEFINED) for b in content if type(b) is dict and b.get("type") == "text"]


def _truncate(text: str, limit: int) -> str:
    length = js_length(text)
    if length <= limit:
        return text
    if text.isascii():
        head = text[:limit]
    else:
        units = text.encode("utf-16-le", "surrogatepass")[: 2 * limit]
        head = units.decode("utf-16-le", "surrogatepass")
    return f"{head}\n\n[... {length - limit} more characters truncated]"


def _tool_call_text(block: dict) -> str:
    arguments = block.get("arguments", UNDEFINED)
    if type(arguments) is dict:
        items = _js_entries(arguments)
    elif isinstance(arguments, list):
        items = [(str(i), v) for i, v in enumerate(arguments)]
    else:
        items = []
    args = ", ".join(f"{k}={'undefined' if v is UNDEFINED else dumps(v)}" for k, v in items)
    return f"{js_to_string(block.get('name', UNDEFINED))}({args})"


def serialize_conversation(llm_messages: list) -> str:
    """Pi's ``serializeConversation`` of :func:`~sessions_tree.context.convert_to_llm`
    output: ``[User]:``, ``[Assistant thinking]:``, ``[Assistant]:``,
    ``[Assistant tool calls]:`` and ``[Tool result]:`` parts (tool results cut at
    2000 UTF-16 units), empty parts left out, joined by blank lines."""
    parts = []
    for message in llm_messages:
        if type(message) is not dict:
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = content if type(content) is str else _join_text(_text_blocks(content))
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            texts, thinking, calls = [], [], []
            for block in content if isinstance(content, list) else []:
                if type(block) is not dict:
                    continue
                kind = block.get("type")
                if kind == "text":
                    texts.append(block.get("text", UNDEFINED))
                elif kind == "thinking":
                    thinking.append(block.get("thinking", UNDEFINED))
                elif kind == "toolCall":
                    calls.append(_tool_call_text(block))
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(_join_text([t]) for t in thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(_join_text([t]) for t in texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = content if type(content) is str else _join_text(_text_blocks(content))
            if text:
                parts.append(f"[Tool result]: {_truncate(text, TOOL_RESULT_MAX_CHARS)}")
    return "\n\n".join(parts)


def conversation_text(messages: list) -> str:
    """``<conversation>`` block of a summary request for agent messages."""
    return f"<conversation>\n{serialize_conversation(convert_to_llm(messages))}\n</conversation>\n\n"


# --------------------------------------------------------------------------- requests and result


@dataclass(frozen=True)
class SummaryRequest:
    """One summarizer call: a system prompt and one user message with ``user_text``.

    ``kind`` is ``"history"``, ``"turn_prefix"`` or ``"branch"``; ``reasoning`` is
    the thinking level to request, or None for none (Pi: compaction summaries use
    the session's level on reasoning-capable models, branch summaries never).
    """

    kind: str
    system_prompt: str
    user_text: str
    max_tokens: int
    reasoning: str | None = None

    def llm_messages(self, timestamp_ms: int) -> list[dict]:
        """The message list Pi sends (one user message, one text block)."""
        return [{"role": "user", "content": [{"type": "text", "text": self.user_text}], "timestamp": timestamp_ms}]

    def to_pi(self) -> dict:
        """``{systemPrompt, userText, maxTokens[, reasoning]}`` as the oracle records a call."""
        out = {"systemPrompt": self.system_prompt, "userText": self.user_text, "maxTokens": self.max_tokens}
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        return out


def _reasoning(value) -> str | None:
    if value is None or value is False:
        return None
    if type(value) is not str:
        raise TypeError(f"reasoning must be a thinking level string or None, not {value!r}")
    return value if value and value != "off" else None


def compaction_requests(
    prep: CompactionPreparation,
    *,
    custom_instructions: str | None = None,
    reasoning: str | None = None,
    settings: CompactionSettings | None = None,
) -> list[SummaryRequest]:
    """The summarizer calls Pi's ``compact`` makes, in its order.

    A split turn with a prefix asks for the history summary (only when there is
    history) and for the turn-prefix summary; otherwise one history summary.
    ``custom_instructions`` (manual ``/compact`` text) is appended to the history
    prompt as ``Additional focus``. ``reasoning`` is the thinking level to
    request (see :func:`summary_reasoning`; ``"off"`` counts as None).
    ``settings`` defaults to the preparation's (``maxTokens`` = 80 % / 50 % of
    ``reserve_tokens``).
    """
    settings = settings or prep.settings
    level = _reasoning(reasoning)
    requests = []
    if not prep.needs_turn_prefix or prep.messages_to_summarize:
        previous = prep.previous_summary
        has_previous = js_truthy(previous)
        prompt = HISTORY_UPDATE_PROMPT if has_previous else HISTORY_PROMPT
        if custom_instructions:
            prompt = f"{prompt}\n\nAdditional focus: {custom_instructions}"
        text = conversation_text(prep.messages_to_summarize)
        if has_previous:
            text += f"<previous-summary>\n{js_to_string(previous)}\n</previous-summary>\n\n"
        requests.append(
            SummaryRequest(
                kind="history",
                system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
                user_text=text + prompt,
                max_tokens=math.floor(0.8 * settings.reserve_tokens),
                reasoning=level,
            )
        )
    if prep.needs_turn_prefix:
        requests.append(
            SummaryRequest(
                kind="turn_prefix",
                system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
                user_text=conversation_text(prep.turn_prefix_messages) + TURN_PREFIX_PROMPT,
                max_tokens=math.floor(0.5 * settings.reserve_tokens),
                reasoning=level,
            )
        )
    return requests


def compaction_result(prep: CompactionPreparation, replies: dict[str, str]) -> dict:
    """The fields of the compaction entry Pi appends, from the model's replies
    (``{kind: text}``, text = the reply's text blocks joined by ``\\n``):
    ``{summary, firstKeptEntryId, tokensBefore, details: {readFiles, modifiedFiles}}``.

    A split turn joins the history summary (``No prior history.`` when there was
    none) and the turn-prefix summary; the file lists are appended to the
    summary. Raises ValueError when a needed reply is missing or an unexpected
    one is given.
    """
    needed = []
    if not prep.needs_turn_prefix or prep.messages_to_summarize:
        needed.append("history")
    if prep.needs_turn_prefix:
        needed.append("turn_prefix")
    missing = [k for k in needed if k not in replies]
    extra = sorted(k for k in replies if k not in needed)
    if missing or extra:
        raise ValueError(f"compaction replies: expected {needed}, missing {missing}, unexpected {extra}")
    for kind, text in replies.items():
        if type(text) is not str:
            raise TypeError(f"reply {kind!r} must be a string, not {type(text).__name__}")
    if prep.needs_turn_prefix:
        history = replies.get("history", NO_PRIOR_HISTORY)
        summary = history + SPLIT_TURN_SEPARATOR + replies["turn_prefix"]
    else:
        summary = replies["history"]
    read_files, modified_files = prep.file_ops.file_lists()
    summary += file_operations_suffix(read_files, modified_files)
    return {
        "summary": summary,
        "firstKeptEntryId": prep.first_kept_entry_id,
        "tokensBefore": prep.tokens_before,
        "details": {"readFiles": read_files, "modifiedFiles": modified_files},
    }
