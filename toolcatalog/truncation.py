"""Output truncation with Pi's limits and semantics.

Two independent limits, whichever is hit first: ``DEFAULT_MAX_LINES`` lines and
``DEFAULT_MAX_BYTES`` bytes of UTF-8. ``truncate_head`` keeps the beginning
(file reads, listings), ``truncate_tail`` keeps the end (command output, where
the error usually is). Both cut only between lines, except that a tail whose
last line alone is too big keeps the end of that line, cut on a character
boundary. Lines are what ``str.split("\\n")`` gives, as in Pi (a trailing
newline makes an empty last line).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500


def format_size(num_bytes: int) -> str:
    if num_bytes < 1024:
        return f"{num_bytes}B"
    if num_bytes < 1024 * 1024:
        return f"{num_bytes / 1024:.1f}KB"
    return f"{num_bytes / (1024 * 1024):.1f}MB"


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class Truncation:
    """What was kept and what was cut. ``to_details()`` is Pi's ``TruncationResult`` shape."""

    content: str
    truncated: bool
    truncated_by: str | None  # "lines" | "bytes" | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool = False
    first_line_exceeds_limit: bool = False
    max_lines: int = DEFAULT_MAX_LINES
    max_bytes: int = DEFAULT_MAX_BYTES

    def to_details(self) -> dict[str, Any]:
        """Pi's camelCase field names, without the content (it is in the text block)."""
        d = asdict(self)
        return {
            "truncated": d["truncated"],
            "truncatedBy": d["truncated_by"],
            "totalLines": d["total_lines"],
            "totalBytes": d["total_bytes"],
            "outputLines": d["output_lines"],
            "outputBytes": d["output_bytes"],
            "lastLinePartial": d["last_line_partial"],
            "firstLineExceedsLimit": d["first_line_exceeds_limit"],
            "maxLines": d["max_lines"],
            "maxBytes": d["max_bytes"],
        }


def truncate_head(
    content: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole lines from the start. If the first line alone is too big, keep nothing."""
    total_bytes = utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return Truncation(content, False, None, total_lines, total_bytes, total_lines, total_bytes,
                          max_lines=max_lines, max_bytes=max_bytes)
    if utf8_len(lines[0]) > max_bytes:
        return Truncation("", True, "bytes", total_lines, total_bytes, 0, 0,
                          first_line_exceeds_limit=True, max_lines=max_lines, max_bytes=max_bytes)
    kept: list[str] = []
    used = 0
    truncated_by = "lines"
    for index, line in enumerate(lines):
        if index >= max_lines:
            break
        cost = utf8_len(line) + (1 if index > 0 else 0)
        if used + cost > max_bytes:
            truncated_by = "bytes"
            break
        kept.append(line)
        used += cost
    out = "\n".join(kept)
    return Truncation(out, True, truncated_by, total_lines, total_bytes, len(kept), utf8_len(out),
                      max_lines=max_lines, max_bytes=max_bytes)


def _tail_of_line(line: str, max_bytes: int) -> str:
    """The last ``max_bytes`` bytes of ``line``, starting on a character boundary."""
    data = line.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return line
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:].decode("utf-8", "replace")


def truncate_tail(
    content: str,
    *,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    total_lines: int | None = None,
    total_bytes: int | None = None,
) -> Truncation:
    """Keep whole lines from the end; a too-big last line is kept partially (its end).

    ``total_lines``/``total_bytes`` describe the full output when ``content`` is
    only its retained tail (streamed command output).
    """
    lines = content.split("\n")
    known_lines = len(lines) if total_lines is None else total_lines
    known_bytes = utf8_len(content) if total_bytes is None else total_bytes
    complete = total_lines is None or total_lines == len(lines)
    if complete and len(lines) <= max_lines and utf8_len(content) <= max_bytes:
        return Truncation(content, False, None, known_lines, known_bytes, len(lines), utf8_len(content),
                          max_lines=max_lines, max_bytes=max_bytes)
    kept: list[str] = []
    used = 0
    truncated_by = "lines"
    partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        cost = utf8_len(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            truncated_by = "bytes"
            if not kept:
                piece = _tail_of_line(line, max_bytes)
                kept.append(piece)
                used = utf8_len(piece)
                partial = True
            break
        kept.append(line)
        used += cost
    kept.reverse()
    out = "\n".join(kept)
    truncated = not complete or len(kept) < len(lines) or partial
    return Truncation(out, truncated, truncated_by if truncated else None, known_lines, known_bytes,
                      len(kept), utf8_len(out), last_line_partial=partial,
                      max_lines=max_lines, max_bytes=max_bytes)


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """One line cut to ``max_chars`` characters, marked like Pi's grep does."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}... [truncated]", True
