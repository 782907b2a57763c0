"""Branch summaries as pure logic: what Pi's ``/tree`` navigation summarizes when
the user leaves a branch, the summarizer request, and the stored entry
(pi-session-format.md §7.2, §11).

The runtime does the LLM call::

    new_leaf, editor_text = navigation_target(entries, target_id)
    entries_to_summarize = collect_entries_for_branch_summary(entries, old_leaf_id, target_id)
    if summarize and entries_to_summarize:
        messages, file_ops = prepare_branch_entries(entries_to_summarize, branch_summary_budget(window))
        reply = llm(branch_summary_request(messages, ...)) if messages else None
        fields = branch_summary_result(reply, file_ops)   # {summary, details}
        # append_branch_summary(from_entry_id=new_leaf, **fields), fromHook False
    else:
        # just move the leaf to new_leaf (None: reset to before the first entry)

For the same entries and model reply every value equals Pi 0.73.1's
(``collectEntriesForBranchSummary``, ``prepareBranchEntries``,
``generateBranchSummary``, ``AgentSession.navigateTree``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sessions_tree.compaction import (
    SUMMARIZATION_SYSTEM_PROMPT,
    FileOps,
    SummaryRequest,
    conversation_text,
    file_operations_suffix,
    message_from_entry,
)
from sessions_tree.context import estimate_tokens
from sessions_tree.jsonl import UNDEFINED, js_to_string
from sessions_tree.path import (
    MissingLeafError,
    get_path,
    id_key,
    index_by_id,
    js_truthy,
)

__all__ = [
    "BRANCH_SUMMARY_MAX_TOKENS",
    "BRANCH_SUMMARY_PREAMBLE",
    "BRANCH_SUMMARY_PROMPT",
    "DEFAULT_CONTEXT_WINDOW",
    "NO_CONTENT_SUMMARY",
    "branch_summary_budget",
    "branch_summary_request",
    "branch_summary_result",
    "collect_entries_for_branch_summary",
    "navigation_target",
    "prepare_branch_entries",
]

BRANCH_SUMMARY_MAX_TOKENS = 2048
DEFAULT_CONTEXT_WINDOW = 128000  # Pi's fallback when the model has no context window
NO_CONTENT_SUMMARY = "No content to summarize"
BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"
)

BRANCH_SUMMARY_PROMPT = """Create a structured summary of this conversation branch for context when returning later.

Use this EXACT format:

## Goal
[What was the user trying to accomplish in this branch?]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [What should happen next to continue this work]

Keep each section concise. Preserve exact file paths, function names, and error messages."""


def _index(entries_or_index) -> Mapping:
    return entries_or_index if isinstance(entries_or_index, Mapping) else index_by_id(entries_or_index)


def _key(entry_id):
    return entry_id if type(entry_id) is str else id_key(entry_id)


def collect_entries_for_branch_summary(entries_or_index, old_leaf_id, target_id) -> list[dict]:
    """The entries a summary of the branch being left covers (Pi's
    ``collectEntriesForBranchSummary``): from the old leaf back to, not
    including, the deepest entry that is on both the old leaf's and the target's
    root path; oldest first. Compactions and branch summaries on the way are
    included. Empty when there is no old leaf or the target is a descendant of
    (or is) the old leaf.

    ``entries_or_index`` is the session's entries (file order) or an
    :func:`~sessions_tree.path.index_by_id` mapping. An unknown old leaf or
    target raises :class:`~sessions_tree.path.MissingLeafError`, a cycle
    :class:`~sessions_tree.path.CycleError`.
    """
    if old_leaf_id is None:
        return []
    index = _index(entries_or_index)
    old_path = get_path(index, old_leaf_id)
    target_path = get_path(index, target_id)
    old_ids = {_key(e.get("id", UNDEFINED)) for e in old_path}
    common = None
    for entry in reversed(target_path):
        key = _key(entry.get("id", UNDEFINED))
        if key in old_ids:
            common = key
            break
    if common is None:
        return list(old_path)
    for i in range(len(old_path) - 1, -1, -1):
        if _key(old_path[i].get("id", UNDEFINED)) == common:
            return old_path[i + 1 :]
    return list(old_path)  # not reached: common is an id of old_path


def _branch_message(entry: dict):
    # Pi's branch-summarization getMessageFromEntry: tool results are left out
    # (the assistant's tool call carries their context).
    if entry.get("type") == "message":
        message = entry.get("message")
        if type(message) is dict and message.get("role") == "toolResult":
            return None
    return message_from_entry(entry)


def prepare_branch_entries(entries: list[dict], token_budget: int) -> tuple[list, FileOps]:
    """Pi's ``prepareBranchEntries``: the messages to summarize and the files touched.

    File operations start from the ``details`` of every earlier ``branch_summary``
    in ``entries`` (unless ``fromHook``). Then entries are walked newest to oldest,
    collecting the tool-call file operations of each visited message and adding
    messages while the estimated total stays within ``token_budget`` (<= 0: no
    limit); at the first one that does not fit the walk stops, but a compaction
    or branch summary there is still taken when the total is below 90 % of the
    budget. Messages come back oldest first.
    """
    file_ops = FileOps()
    for entry in entries:
        if (
            entry.get("type") == "branch_summary"
            and not js_truthy(entry.get("fromHook"))
            and js_truthy(entry.get("details"))
        ):
            file_ops.add_from_details(entry["details"])
    messages: list = []
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        file_ops.add_from_message(message)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < token_budget * 0.9:
                messages.append(message)
                total += tokens
            break
        messages.append(message)
        total += tokens
    messages.reverse()
    return messages, file_ops


def branch_summary_budget(context_window: int | None, reserve_tokens: int = 16384) -> int:
    """Token budget of the summarized branch: the model's context window (128000
    when unknown or 0) minus ``reserve_tokens`` (Pi's ``branchSummary.reserveTokens``)."""
    return (context_window or DEFAULT_CONTEXT_WINDOW) - reserve_tokens


def branch_summary_request(
    messages: list, *, custom_instructions: str | None = None, replace_instructions: bool = False
) -> SummaryRequest:
    """The summarizer call for a branch (Pi's ``generateBranchSummary``): the
    serialized conversation, then the branch prompt, with ``custom_instructions``
    as ``Additional focus`` or, with ``replace_instructions``, instead of the
    prompt. 2048 output tokens, never reasoning. ``messages`` must not be empty
    (then there is nothing to ask: pass None to :func:`branch_summary_result`).
    """
    if not messages:
        raise ValueError("no messages to summarize: the branch summary is 'No content to summarize' (reply None)")
    if replace_instructions and custom_instructions:
        instructions = custom_instructions
    elif custom_instructions:
        instructions = f"{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {custom_instructions}"
    else:
        instructions = BRANCH_SUMMARY_PROMPT
    return SummaryRequest(
        kind="branch",
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        user_text=conversation_text(messages) + instructions,
        max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
        reasoning=None,
    )


def branch_summary_result(reply_text: str | None, file_ops: FileOps) -> dict:
    """``{summary, details}`` of the ``branch_summary`` entry Pi writes.

    ``reply_text`` is the model's text (text blocks joined by ``\\n``), or None
    when there were no messages to summarize: then the summary is the literal
    ``No content to summarize`` and both file lists are empty. Otherwise the
    summary is Pi's preamble + reply + the file lists of ``file_ops``.
    """
    if reply_text is None:
        return {"summary": NO_CONTENT_SUMMARY, "details": {"readFiles": [], "modifiedFiles": []}}
    if type(reply_text) is not str:
        raise TypeError(f"reply_text must be a string or None, not {type(reply_text).__name__}")
    read_files, modified_files = file_ops.file_lists()
    summary = BRANCH_SUMMARY_PREAMBLE + reply_text + file_operations_suffix(read_files, modified_files)
    return {"summary": summary, "details": {"readFiles": read_files, "modifiedFiles": modified_files}}


def _text_of(content) -> str:
    if type(content) is str:
        return content
    if isinstance(content, list):
        return "".join(
            "" if t is None or t is UNDEFINED else js_to_string(t)
            for t in (b.get("text", UNDEFINED) for b in content if type(b) is dict and b.get("type") == "text")
        )
    return ""


def navigation_target(entries_by_id, target_id) -> tuple[str | None, str | None]:
    """Pi's ``/tree`` rule for where the leaf goes when the user selects ``target_id``:
    a user message or a ``custom_message`` -> its parent (None: before the first
    entry) and its text goes back to the editor; anything else -> the target
    itself, no editor text. ``entries_by_id`` is the entries or an index;
    an unknown target raises :class:`~sessions_tree.path.MissingLeafError`.
    """
    entry = _index(entries_by_id).get(_key(target_id))
    if entry is None:
        raise MissingLeafError(target_id)
    kind = entry.get("type")
    parent = entry.get("parentId")
    if kind == "message":
        message = entry.get("message")
        if type(message) is dict and message.get("role") == "user":
            return (parent if js_truthy(parent) else None), _text_of(message.get("content"))
    elif kind == "custom_message":
        return (parent if js_truthy(parent) else None), _text_of(entry.get("content"))
    return target_id, None
