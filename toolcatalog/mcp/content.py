"""An MCP ``CallToolResult`` as a Pi tool result.

Text stays text; images become Pi image blocks; audio and resources become short text
*references* (a ``resource_link`` or an embedded resource is named by its URI and type, an
embedded text resource also gives its text); ``structuredContent`` without content blocks
is shown as JSON. The text is truncated like the file tools' output (Pi's 2000 lines /
50 KB, head kept) and ``isError`` carries over: a server's error is a tool error the model
reads, never a failed run.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from toolcatalog.protocol import ToolResult
from toolcatalog.truncation import format_size, truncate_head

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def _reference(resource: dict[str, Any]) -> str:
    uri = resource.get("uri", "?")
    kind = resource.get("mimeType")
    name = resource.get("name") or resource.get("title")
    label = f"{name} " if name and name != uri else ""
    return f"[resource {label}<{uri}>{f' ({kind})' if kind else ''}]"


def convert_result(result: Any, *, server: str, tool: str) -> ToolResult:
    """``result``: the SDK's ``CallToolResult`` (or its dict)."""
    data = result if isinstance(result, dict) else result.model_dump(by_alias=True, exclude_none=True, mode="json")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    references: list[dict[str, Any]] = []
    notes: list[str] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            mime, payload = block.get("mimeType", ""), block.get("data", "")
            try:
                size = len(base64.b64decode(payload, validate=True))
            except (binascii.Error, ValueError):
                notes.append(f"[image ({mime}) dropped: its data is not valid base64]")
                continue
            if mime not in IMAGE_TYPES:
                notes.append(f"[image ({mime}, {format_size(size)}) dropped: only {', '.join(IMAGE_TYPES)} are shown]")
            elif size > MAX_IMAGE_BYTES:
                notes.append(f"[image ({mime}, {format_size(size)}) dropped: larger than {format_size(MAX_IMAGE_BYTES)}]")
            else:
                images.append({"type": "image", "data": payload, "mimeType": mime})
        elif kind == "audio":
            notes.append(f"[audio ({block.get('mimeType', '?')}) omitted: audio is not passed to the model]")
        elif kind == "resource_link":
            references.append({k: block[k] for k in ("uri", "name", "mimeType", "description") if k in block})
            texts.append(_reference(block))
        elif kind == "resource":
            resource = block.get("resource") or {}
            references.append({k: resource[k] for k in ("uri", "mimeType") if k in resource})
            line = _reference(resource)
            if isinstance(resource.get("text"), str):
                line += "\n" + resource["text"]
            elif "blob" in resource:
                line += " (binary content not shown)"
            texts.append(line)
        else:
            notes.append(f"[content of type {kind!r} omitted]")
    if not texts and not images and data.get("structuredContent") is not None:
        texts.append(json.dumps(data["structuredContent"], ensure_ascii=False, indent=2))
    text = "\n".join(texts + notes)
    details: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    if references:
        details["resources"] = references
    cut = truncate_head(text)
    if cut.truncated:
        details["truncation"] = cut.to_details()
        text = cut.content + f"\n\n[Output truncated: showing {cut.output_lines} of {cut.total_lines} lines ({format_size(cut.output_bytes)} of {format_size(cut.total_bytes)}).]"
    content: list[dict[str, Any]] = []
    if text or not images:
        content.append({"type": "text", "text": text if text else "(no output)"})
    content += images
    return ToolResult(content=content, details=details, is_error=bool(data.get("isError")))
