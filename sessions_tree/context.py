"""The LLM context of a leaf: Pi's ``buildSessionContext`` and ``convertToLlm``.

pi-session-format.md §8-§10.2. Messages in a context are the stored message
dicts themselves (never copied); only messages Pi *creates* (compaction and
branch summaries, custom messages) are new dicts. Besides Pi's
``messages``/``thinkingLevel``/``model`` a context carries ``source_entry_ids``:
the id of the entry that produced each message.

Where Pi would throw on malformed entries (a ``message`` entry without a message
object, an assistant message without ``content``) Neta carries on: such values
count as empty. Cycles raise :class:`~sessions_tree.path.CycleError` where Pi
loops forever.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from sessions_tree.ids import iso_to_ms
from sessions_tree.jsonl import UNDEFINED, dumps, js_to_string
from sessions_tree.path import id_key, index_by_id, js_same, js_truthy, walk_from_entry

__all__ = [
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "LAST",
    "ContextTokens",
    "Prefix",
    "SessionContext",
    "bash_execution_to_text",
    "build_session_context",
    "context_from_path",
    "convert_to_llm",
    "date_ms",
    "estimate_context_tokens",
    "estimate_context_usage",
    "estimate_tokens",
    "extend_context",
    "js_length",
]

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"


class _Last:
    def __repr__(self) -> str:
        return "LAST"


LAST = _Last()  # build_session_context's default leaf: the last entry, as Pi


class Prefix(Sequence):
    """A read-only list: the first ``n`` items of a list that only ever grows at its end.

    Contexts of successive leaves share one such list: extending the newest context
    appends to it in place (O(new messages)) and every older context still sees
    exactly its own prefix. Extending an older context copies its prefix first.
    Compares equal to any list or tuple with the same items; slicing returns a list.
    """

    __slots__ = ("_items", "_n")
    _grow_lock = threading.Lock()

    def __init__(self, items: list, n: int | None = None):
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step == 1:
                return self._items[start:stop] if start < stop else []
            return [self._items[k] for k in range(start, stop, step)]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("Prefix index out of range")
        return self._items[i]

    def __iter__(self):
        return islice(self._items, self._n)

    def __reversed__(self):
        items = self._items
        return (items[i] for i in range(self._n - 1, -1, -1))

    def __eq__(self, other) -> bool:
        if not isinstance(other, (Prefix, list, tuple)):
            return NotImplemented
        return len(other) == self._n and all(a == b for a, b in zip(self, other))

    __hash__ = None  # mutable underneath, like a list

    def __repr__(self) -> str:
        return f"Prefix({list(self)!r})"

    def extended(self, new: list) -> Prefix:
        """This prefix followed by ``new``."""
        if not new:
            return self
        with Prefix._grow_lock:
            if len(self._items) == self._n:  # the newest view: grow the shared list
                self._items.extend(new)
                return Prefix(self._items, self._n + len(new))
        return Prefix([*self, *new])


@dataclass(frozen=True)
class SessionContext:
    """What the model sees at a leaf (before :func:`convert_to_llm`).

    ``thinking_level`` is ``"off"`` unless the path sets it (None if the deciding
    entry has no ``thinkingLevel``); ``model`` is None or ``{"provider", "modelId"}``
    (keys missing when the deciding entry lacks them, as Pi's ``{}``).
    ``messages`` and ``source_entry_ids`` are read-only sequences (a :class:`Prefix`
    when built here; plain lists are accepted); messages are the stored dicts.
    """

    messages: Sequence
    thinking_level: object
    model: dict | None
    source_entry_ids: Sequence


def _empty() -> SessionContext:
    return SessionContext(messages=[], thinking_level="off", model=None, source_entry_ids=[])


def date_ms(value) -> int | None:
    """``new Date(value).getTime()`` for a JSON value; None where JavaScript gives NaN."""
    if type(value) is str:
        return iso_to_ms(value)
    if value is None:
        return 0
    if value is True or value is False:
        return int(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if abs(value) > 8.64e15:
            return None
        return int(value)  # TimeClip truncates towards zero
    if isinstance(value, list):
        return iso_to_ms(js_to_string(value))
    return None  # undefined, objects ("[object Object]")


def _model_of(obj: dict, provider_key: str, model_key: str) -> dict:
    model = {}
    if provider_key in obj:
        model["provider"] = obj[provider_key]
    if model_key in obj:
        model["modelId"] = obj[model_key]
    return model


def _custom_message(entry: dict) -> dict:
    # createCustomMessage(customType, content, display, details, timestamp)
    message = {"role": "custom"}
    for key in ("customType", "content", "display", "details"):
        if key in entry:
            message[key] = entry[key]
    message["timestamp"] = date_ms(entry.get("timestamp", UNDEFINED))
    return message


def _branch_summary_message(entry: dict) -> dict:
    # createBranchSummaryMessage(summary, fromId, timestamp)
    message = {"role": "branchSummary", "summary": entry["summary"]}
    if "fromId" in entry:
        message["fromId"] = entry["fromId"]
    message["timestamp"] = date_ms(entry.get("timestamp", UNDEFINED))
    return message


def _compaction_summary_message(entry: dict) -> dict:
    # createCompactionSummaryMessage(summary, tokensBefore, timestamp)
    message = {"role": "compactionSummary"}
    if "summary" in entry:
        message["summary"] = entry["summary"]
    if "tokensBefore" in entry:
        message["tokensBefore"] = entry["tokensBefore"]
    message["timestamp"] = date_ms(entry.get("timestamp", UNDEFINED))
    return message


def _scan(entries, messages: list, sources: list, where: list | None, thinking_entry, model_source):
    """One pass over path entries: append the messages they produce (§8 step 4)
    with their entry ids (and path indexes into ``where``), and track the entries
    that decide the thinking level and the model and the last compaction."""
    compaction = -1
    for i, entry in enumerate(entries):
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            messages.append(message)
            sources.append(entry.get("id"))
            if where is not None:
                where.append(i)
            if type(message) is dict and message.get("role") == "assistant":
                model_source = message
        elif kind == "custom_message":
            messages.append(_custom_message(entry))
            sources.append(entry.get("id"))
            if where is not None:
                where.append(i)
        elif kind == "branch_summary":
            summary = entry.get("summary")
            if summary if type(summary) is str else js_truthy(summary):
                messages.append(_branch_summary_message(entry))
                sources.append(entry.get("id"))
                if where is not None:
                    where.append(i)
        elif kind == "thinking_level_change":
            thinking_entry = entry
        elif kind == "model_change":
            model_source = entry
        elif kind == "compaction":
            compaction = i
    return thinking_entry, model_source, compaction


def _thinking_level(entry, default):
    return default if entry is None else entry.get("thinkingLevel")


def _model(source, default):
    if source is None:
        return default
    if source.get("type") == "model_change":
        return _model_of(source, "provider", "modelId")
    return _model_of(source, "provider", "model")  # an assistant message


def context_from_path(path_entries: list[dict]) -> SessionContext:
    """Pi's ``buildSessionContext`` for an already-walked root-to-leaf path."""
    messages: list = []
    sources: list = []
    where: list = []
    thinking_entry, model_source, c = _scan(path_entries, messages, sources, where, None, None)
    if c >= 0:
        # Summary first, then the kept entries from firstKeptEntryId up to the
        # compaction (none if that id is not on the path before it), then the rest.
        compaction = path_entries[c]
        first_kept = compaction.get("firstKeptEntryId", UNDEFINED)
        start = c
        if type(first_kept) is str:
            for i in range(c):
                if path_entries[i].get("id") == first_kept:
                    start = i
                    break
        else:
            for i in range(c):
                if js_same(path_entries[i].get("id", UNDEFINED), first_kept):
                    start = i
                    break
        cut = bisect_left(where, start)
        messages = [_compaction_summary_message(compaction), *messages[cut:]]
        sources = [compaction.get("id"), *sources[cut:]]
    return SessionContext(
        messages=Prefix(messages),
        thinking_level=_thinking_level(thinking_entry, "off"),
        model=_model(model_source, None),
        source_entry_ids=Prefix(sources),
    )


def build_session_context(entries: list[dict], leaf_id=LAST, *, index=None) -> SessionContext:
    """Pi's ``buildSessionContext(entries, leafId)``.

    ``leaf_id=None`` is the empty context (leaf before the first entry); an id
    not in ``entries`` (or :data:`LAST`) falls back to the last entry, as Pi does.
    ``index`` may pass a ready :func:`~sessions_tree.path.index_by_id` of ``entries``.
    Raises CycleError for a cycle on the path.
    """
    if leaf_id is None:
        return _empty()
    if index is None:
        index = index_by_id(entries)
    leaf = None
    if leaf_id is not LAST and js_truthy(leaf_id):
        leaf = index.get(leaf_id if type(leaf_id) is str else id_key(leaf_id))
    if leaf is None:
        if not entries:
            return _empty()
        leaf = entries[-1]
    return context_from_path(walk_from_entry(index, leaf))


def extend_context(ctx: SessionContext, new_path_entries: list[dict]) -> SessionContext | None:
    """The context of (old path + ``new_path_entries``), each new entry a child of
    the one before, without walking the old path again.

    Returns None when a new entry is a compaction (the kept range then depends on
    the old path: rebuild with :func:`context_from_path`). Equal to
    ``context_from_path(old_path + new_path_entries)`` otherwise.
    """
    for entry in new_path_entries:
        if entry.get("type") == "compaction":
            return None
    messages: list = []
    sources: list = []
    thinking_entry, model_source, _ = _scan(new_path_entries, messages, sources, None, None, None)
    thinking_level = _thinking_level(thinking_entry, ctx.thinking_level)
    model = _model(model_source, ctx.model)
    return SessionContext(
        messages=_followed_by(ctx.messages, messages),
        thinking_level=thinking_level,
        model=model,
        source_entry_ids=_followed_by(ctx.source_entry_ids, sources),
    )


def _followed_by(items: Sequence, new: list) -> Prefix:
    """``items`` then ``new``: in place when ``items`` is the newest view of its list."""
    if type(items) is Prefix:
        return items.extended(new)
    return Prefix([*items, *new])


# --------------------------------------------------------------------------- convertToLlm


def js_length(s: str) -> int:
    """JavaScript ``s.length``: UTF-16 code units (characters beyond U+FFFF count 2)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def bash_execution_to_text(message: dict) -> str:
    """Pi's ``bashExecutionToText``: what the model reads for a ``!command`` run."""
    text = f"Ran `{js_to_string(message.get('command', UNDEFINED))}`\n"
    output = message.get("output", UNDEFINED)
    if js_truthy(output):
        text += f"```\n{js_to_string(output)}\n```"
    else:
        text += "(no output)"
    exit_code = message.get("exitCode", UNDEFINED)
    if js_truthy(message.get("cancelled", UNDEFINED)):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code is not UNDEFINED and not js_same(exit_code, 0):
        text += f"\n\nCommand exited with code {js_to_string(exit_code)}"
    if js_truthy(message.get("truncated", UNDEFINED)) and js_truthy(message.get("fullOutputPath", UNDEFINED)):
        text += f"\n\n[Output truncated. Full output: {js_to_string(message['fullOutputPath'])}]"
    return text


def _user(content, message: dict) -> dict:
    out = {"role": "user", "content": content}
    if "timestamp" in message:
        out["timestamp"] = message["timestamp"]
    return out


def convert_to_llm(messages: list) -> list[dict]:
    """Pi's ``convertToLlm``: user/assistant/toolResult unchanged (same dicts);
    ``bashExecution`` (unless ``excludeFromContext``), ``custom`` and the two
    summaries become user messages with Pi's exact wrappers; other roles dropped."""
    out = []
    for m in messages:
        if type(m) is not dict:
            continue
        role = m.get("role")
        if role in ("user", "assistant", "toolResult"):
            out.append(m)
        elif role == "bashExecution":
            if js_truthy(m.get("excludeFromContext", UNDEFINED)):
                continue
            out.append(_user([{"type": "text", "text": bash_execution_to_text(m)}], m))
        elif role == "custom":
            content = m.get("content", UNDEFINED)
            if type(content) is str:
                content = [{"type": "text", "text": content}]
            message = {"role": "user"}
            if content is not UNDEFINED:
                message["content"] = content
            if "timestamp" in m:
                message["timestamp"] = m["timestamp"]
            out.append(message)
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + js_to_string(m.get("summary", UNDEFINED)) + BRANCH_SUMMARY_SUFFIX
            out.append(_user([{"type": "text", "text": text}], m))
        elif role == "compactionSummary":
            text = COMPACTION_SUMMARY_PREFIX + js_to_string(m.get("summary", UNDEFINED)) + COMPACTION_SUMMARY_SUFFIX
            out.append(_user([{"type": "text", "text": text}], m))
    return out


# --------------------------------------------------------------------------- token estimates


def _text_len(value) -> int:
    return js_length(value) if type(value) is str else 0


def _blocks(content) -> list:
    return [b for b in content if type(b) is dict] if isinstance(content, list) else []


def estimate_tokens(message) -> int:
    """Pi's ``estimateTokens``: ``ceil(chars / 4)`` with chars in UTF-16 units (§10.2)."""
    if type(message) is not dict:
        return 0
    role = message.get("role")
    chars = 0
    if role == "user":
        content = message.get("content")
        if type(content) is str:
            chars = js_length(content)
        else:
            for block in _blocks(content):
                if block.get("type") == "text":
                    chars += _text_len(block.get("text"))
    elif role == "assistant":
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                chars += _text_len(block.get("text"))
            elif kind == "thinking":
                chars += _text_len(block.get("thinking"))
            elif kind == "toolCall":
                chars += _text_len(block.get("name"))
                if "arguments" in block:
                    chars += js_length(dumps(block["arguments"]))
    elif role in ("custom", "toolResult"):
        content = message.get("content")
        if type(content) is str:
            chars = js_length(content)
        else:
            for block in _blocks(content):
                kind = block.get("type")
                if kind == "text":
                    chars += _text_len(block.get("text"))
                elif kind == "image":
                    chars += 4800
    elif role == "bashExecution":
        chars = _text_len(message.get("command")) + _text_len(message.get("output"))
    elif role in ("branchSummary", "compactionSummary"):
        chars = _text_len(message.get("summary"))
    else:
        return 0
    return -(-chars // 4)


@dataclass(frozen=True)
class ContextTokens:
    """Pi's ``estimateContextTokens`` result."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def _number(value) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _usage_tokens(usage: dict) -> int:
    total = usage.get("totalTokens")
    if js_truthy(total) and isinstance(total, (int, float)):
        return total
    return sum(_number(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite"))


def estimate_context_usage(messages: list) -> ContextTokens:
    """Tokens of ``messages``: the last assistant message's reported usage (not
    aborted/error) plus estimates of the messages after it; all estimated without one."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if (
            type(m) is dict
            and m.get("role") == "assistant"
            and "usage" in m
            and m.get("stopReason") not in ("aborted", "error")
            and type(m["usage"]) is dict
        ):
            usage_tokens = _usage_tokens(m["usage"])
            trailing = sum(estimate_tokens(x) for x in messages[i + 1 :])
            return ContextTokens(usage_tokens + trailing, usage_tokens, trailing, i)
    estimated = sum(estimate_tokens(m) for m in messages)
    return ContextTokens(estimated, 0, estimated, None)


def estimate_context_tokens(messages: list) -> int:
    """Pi's ``estimateContextTokens(messages).tokens`` (§10.2)."""
    return estimate_context_usage(messages).tokens
