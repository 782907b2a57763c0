"""A session's active path as Markdown (``GET /api/sessions/<id>/export/?as=markdown``;
the chat page's *Download → Markdown*, and the source of its HTML page).

One heading per message as the chat page shows it: a user message (its documents as a
line each), an answer (the model calls of one turn together: tool calls folded in
``<details>``, then the text), summaries. Titles, labels, model changes, feedback and
other bookkeeping are left out; so is thinking.
"""

from __future__ import annotations

import json
import re

from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider

MAX_TOOL_TEXT = 2000
DOCUMENT = re.compile(r'\A<document name="([^"]*)" type="([^"]*)"[^>]*>\n')


def _text_blocks(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _unescape(value: str) -> str:
    return value.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}\n{text}\n{ticks}"


def _cut(text: str, limit: int = MAX_TOOL_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def path_markdown(path: list[dict], *, title: str = "", note: str = "") -> str:
    results = {}
    for entry in path:
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "toolResult":
            results[message.get("toolCallId")] = message
    out = [f"# {title or 'Untitled session'}", ""]
    if note:
        out += [f"*{note}*", ""]
    in_answer = False
    for entry in path:
        kind = entry.get("type")
        message = entry.get("message") if kind == "message" else None
        role = message.get("role") if isinstance(message, dict) else None
        if role == "user":
            in_answer = False
            out += ["## You", ""]
            texts, docs = [], []
            for block in _text_blocks(message.get("content")):
                match = DOCUMENT.match(block)
                if match and block.endswith("\n</document>"):
                    docs.append(f"📎 {_unescape(match.group(1))} ({_unescape(match.group(2))})")
                else:
                    texts.append(block)
            out += ["\n".join(texts), ""]
            out += [f"- {d}" for d in docs] + ([""] if docs else [])
        elif role == "assistant":
            if not in_answer:
                model = message.get("model")
                out += [f"## Assistant · {model}" if model else "## Assistant", ""]
                in_answer = True
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                    out += [block["text"], ""]
                elif block.get("type") == "toolCall":
                    result = results.get(block.get("id"))
                    args = json.dumps(block.get("arguments") or {}, ensure_ascii=False)
                    status = "" if result is None else " (error)" if result.get("isError") else ""
                    body = "\n".join(_text_blocks(result.get("content"))) if result else ""
                    out += [f"<details><summary>Tool: {block.get('name') or 'tool'}{status}</summary>", "", _fence(_cut(args)), ""]
                    if body:
                        out += [_fence(_cut(body)), ""]
                    out += ["</details>", ""]
            if message.get("stopReason") == "error":
                out += [f"> The model failed: {message.get('errorMessage') or 'error'}", ""]
            elif message.get("stopReason") == "aborted":
                out += ["> The answer was stopped.", ""]
            elif message.get("stopReason") == "length":
                out += ["> The answer was cut at the output limit.", ""]
        elif kind in ("compaction", "branch_summary"):
            in_answer = False
            heading = "Context compacted" if kind == "compaction" else "Branch summary"
            out += [f"## {heading}", "", str(entry.get("summary") or ""), ""]
        elif kind == "custom_message" and entry.get("display") is not False:
            in_answer = False
            out += [f"## {entry.get('customType') or 'Note'}", "", "\n".join(_text_blocks(entry.get("content"))), ""]
    return "\n".join(out).rstrip() + "\n"


def session_markdown(meta: AgentSession) -> str:
    path = get_provider(meta.provider).get_active_path(meta.session_id)
    note = f"Exported from Neta: session {meta.session_id}, agent {meta.agent}, {meta.updated_at:%Y-%m-%d %H:%M} UTC."
    return path_markdown(path, title=meta.title, note=note)
