"""``read``: a text file (with offset/limit and Pi's truncation notices) or an image."""

from __future__ import annotations

import base64
import os
import stat
from typing import Any

from toolcatalog.file_kinds import SNIFF_BYTES, is_utf16_text, looks_binary, sniff_image
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import PathRefused, resolve_path
from toolcatalog.protected_paths import HardLinkRefused, refuse_hard_link
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.truncation import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_head,
)

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_UTF16_BYTES = 8 * 1024 * 1024
CHUNK = 1024 * 1024


def open_regular_file(ctx: ToolContext, raw_path: Any, *, verb: str = "read") -> tuple[int, os.stat_result, str]:
    """Resolve, open (no symlink swaps) and check a regular file; returns (fd, stat, shown path)."""
    wp = resolve_path(ctx, raw_path)
    if not wp.exists:
        raise ToolError(f"File not found: {wp.shown}")
    try:
        fd = wp.open_file(os.O_RDONLY | os.O_NONBLOCK)
    except IsADirectoryError:
        raise ToolError(f"{wp.shown} is a directory; use ls to list it") from None
    except PermissionError:
        raise ToolError(f"Permission denied: {wp.shown}") from None
    except PathRefused:
        raise
    except OSError as exc:  # sockets (ENXIO), devices that refuse, …
        raise ToolError(f"Cannot open {wp.shown}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ToolError(f"{wp.shown} is a directory; use ls to list it")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise PathRefused(f"{wp.shown} is not a regular file (device, FIFO or socket); refusing to {verb} it")
    try:
        refuse_hard_link(st, wp.shown, verb=verb)
    except HardLinkRefused:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return fd, st, wp.shown


class _Scan:
    """One pass over a file: counts all lines, keeps the selected ones up to the limits."""

    def __init__(self, start: int, limit: int | None, max_lines: int, max_bytes: int) -> None:
        self.start = start
        self.end = None if limit is None else start + limit
        self.keep_lines = max_lines + 1
        self.keep_bytes = max_bytes + 1
        self.line_no = 0
        self.cur = bytearray()
        self.kept: list[bytes] = []
        self.kept_bytes = 0
        self.collecting = True
        self.first_selected_len = 0
        self.sel_lines = 0
        self.sel_bytes = 0
        self._cur_len = 0

    def _selected(self) -> bool:
        return self.line_no >= self.start and (self.end is None or self.line_no < self.end)

    def feed(self, data: bytes) -> None:
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            piece = data[pos:] if nl < 0 else data[pos:nl]
            if self._selected():
                self._cur_len += len(piece)
                if self.collecting and len(self.cur) < self.keep_bytes:
                    self.cur += piece[: self.keep_bytes - len(self.cur)]
            if nl < 0:
                return
            self._finish_line(newline=True)
            pos = nl + 1

    def _finish_line(self, *, newline: bool) -> None:
        if self._selected():
            if self.sel_lines == 0:
                self.first_selected_len = self._cur_len
            self.sel_lines += 1
            self.sel_bytes += self._cur_len + (1 if newline and (self.end is None or self.line_no + 1 < self.end) else 0)
            if self.collecting:
                self.kept.append(bytes(self.cur))
                self.kept_bytes += len(self.cur) + 1
                if len(self.kept) >= self.keep_lines or self.kept_bytes > self.keep_bytes:
                    self.collecting = False
        self.line_no += 1
        self.cur = bytearray()
        self._cur_len = 0

    def finish(self) -> None:
        self._finish_line(newline=False)

    @property
    def total_lines(self) -> int:
        return self.line_no


class ReadTool(Tool):
    name = "read"
    changes = False
    label = "read"
    description = (
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent "
        f"as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or "
        f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). Use offset/limit for large files. When you "
        "need the full file, continue with offset until complete."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
            "offset": {"type": "integer", "minimum": 1, "description": "Line number to start reading from (1-indexed)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process")

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        fd, st, shown = open_regular_file(ctx, args["path"])
        with os.fdopen(fd, "rb", closefd=True) as fh:
            head = fh.read(SNIFF_BYTES)
            mime = sniff_image(head)
            if mime:
                return self._image(fh, head, st, mime, shown)
            if is_utf16_text(head):
                return self._utf16(fh, head, st, shown, args)
            if looks_binary(head):
                raise ToolError(
                    f"{shown} is a binary file ({format_size(st.st_size)}); read shows text files and "
                    "images (png, jpeg, gif, webp) only. Use bash (e.g. xxd, file, strings) to inspect it."
                )
            scan = _Scan(int(args.get("offset") or 1) - 1, args.get("limit"), DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
            scan.feed(head)
            while True:
                ctx.check_cancelled()
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                scan.feed(chunk)
            scan.finish()
        return self._text(scan, shown, args)

    def _image(self, fh, head: bytes, st: os.stat_result, mime: str, shown: str) -> ToolResult:
        if st.st_size > MAX_IMAGE_BYTES:
            raise ToolError(
                f"{shown} is an image of {format_size(st.st_size)}, larger than the "
                f"{format_size(MAX_IMAGE_BYTES)} limit for image attachments"
            )
        data = head + fh.read(MAX_IMAGE_BYTES + 1 - len(head))
        return ToolResult(
            content=[
                {"type": "text", "text": f"Read image file [{mime}]"},
                {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime},
            ],
            details={"mimeType": mime, "bytes": len(data)},
        )

    def _utf16(self, fh, head: bytes, st: os.stat_result, shown: str, args: dict[str, Any]) -> ToolResult:
        if st.st_size > MAX_UTF16_BYTES:
            raise ToolError(f"{shown} is UTF-16 text of {format_size(st.st_size)}; convert it (iconv) to read it")
        text = (head + fh.read()).decode("utf-16", "replace")
        scan = _Scan(int(args.get("offset") or 1) - 1, args.get("limit"), DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
        scan.feed(text.encode("utf-8"))
        scan.finish()
        return self._text(scan, shown, args)

    def _text(self, scan: _Scan, shown: str, args: dict[str, Any]) -> ToolResult:
        offset = args.get("offset")
        start = scan.start
        if start >= scan.total_lines:
            raise ToolError(f"Offset {offset} is beyond end of file ({scan.total_lines} lines total)")
        selected = "\n".join(line.decode("utf-8", "replace") for line in scan.kept)
        trunc = truncate_head(selected)
        trunc.total_lines = scan.sel_lines
        trunc.total_bytes = scan.sel_bytes
        if not scan.collecting:
            trunc.truncated = True
            if trunc.truncated_by is None:
                trunc.truncated_by = "lines" if len(scan.kept) > DEFAULT_MAX_LINES else "bytes"
        start_display = start + 1
        details: dict[str, Any] | None = None
        if trunc.first_line_exceeds_limit:
            text = (
                f"[Line {start_display} is {format_size(scan.first_selected_len)}, exceeds "
                f"{format_size(DEFAULT_MAX_BYTES)} limit. Use bash: sed -n '{start_display}p' {shown} | "
                f"head -c {DEFAULT_MAX_BYTES}]"
            )
            details = {"truncation": trunc.to_details()}
        elif trunc.truncated:
            end_display = start_display + trunc.output_lines - 1
            text = trunc.content
            if trunc.truncated_by == "lines":
                text += (
                    f"\n\n[Showing lines {start_display}-{end_display} of {scan.total_lines}. "
                    f"Use offset={end_display + 1} to continue.]"
                )
            else:
                text += (
                    f"\n\n[Showing lines {start_display}-{end_display} of {scan.total_lines} "
                    f"({format_size(DEFAULT_MAX_BYTES)} limit). Use offset={end_display + 1} to continue.]"
                )
            details = {"truncation": trunc.to_details()}
        elif scan.end is not None and scan.end < scan.total_lines:
            remaining = scan.total_lines - scan.end
            text = trunc.content + f"\n\n[{remaining} more lines in file. Use offset={scan.end + 1} to continue.]"
        else:
            text = trunc.content
        return ToolResult.text(text, details=details)
