"""A readable text rendering of a session tree (``session_tree`` command, console)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sessions_tree.ids import iso_to_ms
from sessions_tree.tree import labels as compute_labels


def entry_preview(entry: dict, width: int = 100) -> str:
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            message = {"role": "?", "content": message if isinstance(message, str) else ""}
        role = message.get("role", "?")
        text = content_text(message.get("content"))
        if role == "assistant":
            blocks = message.get("content") if isinstance(message.get("content"), list) else []
            calls = [str(b.get("name", "?")) for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]
            if calls:
                text = (text + " " if text else "") + "→ " + ", ".join(calls)
            if message.get("stopReason") in ("aborted", "error"):
                text = f"[{message['stopReason']}] {text}"
        elif role == "toolResult":
            role = f"toolResult({message.get('toolName', '?')})"
        elif role == "bashExecution":
            text = f"$ {message.get('command', '')}"
        summary = f"{role}: {text}"
    elif kind == "model_change":
        summary = f"model → {entry.get('provider')}/{entry.get('modelId')}"
    elif kind == "thinking_level_change":
        summary = f"thinking → {entry.get('thinkingLevel')}"
    elif kind == "compaction":
        summary = f"compaction (kept from {entry.get('firstKeptEntryId')}, {entry.get('tokensBefore')} tokens before)"
    elif kind == "branch_summary":
        summary = f"branch summary: {entry.get('summary', '')}"
    elif kind == "label":
        summary = f"label {entry.get('targetId')} = {entry.get('label', '(cleared)')}"
    elif kind == "session_info":
        summary = f"name: {entry.get('name', '')}"
    elif kind in ("custom", "custom_message"):
        summary = f"{kind} {entry.get('customType')}: {content_text(entry.get('content'))}"
    else:
        summary = str(kind)
    summary = " ".join(summary.split())
    return summary if len(summary) <= width else summary[: width - 1] + "…"


def content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(block.get("text", ""))
                elif block.get("type") == "image":
                    parts.append("[image]")
        return " ".join(parts)
    return ""


def render_tree(entries: list[dict], *, leaf_id: str | None, active_path: list[str], width: int = 100) -> Iterator[str]:
    """Lines of the tree. A chain stays at one indent; each branch point indents its children."""
    for row in tree_rows(entries, leaf_id=leaf_id, active_path=active_path):
        mark = "●" if row.on_path else "○"
        label = f" [{row.label}]" if row.label is not None else ""
        leaf = "  ◀ leaf" if row.is_leaf else ""
        yield f"{'  ' * row.depth}{mark} {row.entry_id}{label} {row.preview(width)}{leaf}"


@dataclass(frozen=True, slots=True)
class TreeRow:
    depth: int
    entry: dict
    label: str | None
    on_path: bool
    is_leaf: bool

    @property
    def entry_id(self) -> str:
        return self.entry["id"]

    def preview(self, width: int = 100) -> str:
        """The entry in one line (computed when asked: a page shows a few of many rows)."""
        try:
            return entry_preview(self.entry, width)
        except (TypeError, AttributeError, ValueError, KeyError):  # fields of types Neta never writes
            return f"{self.entry.get('type')!s:.40} (fields of unexpected types)"


def tree_rows(entries: list[dict], *, leaf_id: str | None, active_path: list[str]) -> Iterator[TreeRow]:
    """The tree in display order (Pi's: siblings by timestamp), one row per entry.

    Iterative, so a 100k-entry chain renders without recursion limits.
    """
    by_id: dict[str, dict] = {}
    order: dict[str, int] = {}
    for position, entry in enumerate(entries):
        by_id[entry["id"]] = entry
        order.setdefault(entry["id"], position)
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry["id"]
        if entry_id in seen:
            continue
        seen.add(entry_id)
        parent = entry.get("parentId")
        if not isinstance(parent, str) or parent == entry_id or parent not in by_id:
            roots.append(entry_id)
        else:
            children.setdefault(parent, []).append(entry_id)
    for siblings in children.values():
        siblings.sort(key=lambda i: (iso_to_ms(by_id[i].get("timestamp")) or 0, order[i]))
    labels = compute_labels(entries)
    on_path = set(active_path)

    stack: list[tuple[str, int]] = [(r, 0) for r in reversed(roots)]
    visited: set[str] = set()
    # Entries on a parent cycle are reached from no root: each loop is shown from
    # its first entry in stored order, after the rest of the tree.
    unreached = iter(by_id)
    while True:
        if not stack:
            start = next((i for i in unreached if i not in visited), None)
            if start is None:
                return
            stack.append((start, 0))
        entry_id, depth = stack.pop()
        if entry_id in visited:  # a cycle: show once
            continue
        visited.add(entry_id)
        entry = by_id[entry_id]
        label = labels.get(entry_id)
        yield TreeRow(depth=depth, entry=entry, label=label if isinstance(label, str) else None if label is None else str(label), on_path=entry_id in on_path, is_leaf=entry_id == leaf_id)
        kids = children.get(entry_id, [])
        if len(kids) == 1:
            stack.append((kids[0], depth))
        else:
            for kid in reversed(kids):
                stack.append((kid, depth + 1))
