"""``write``: create or overwrite a file (parent directories are created)."""

from __future__ import annotations

import os
from typing import Any

from toolcatalog.builtins.edit import unified_diff
from toolcatalog.builtins.read import open_regular_file
from toolcatalog.file_kinds import looks_binary
from toolcatalog.file_writes import encode_text, write_atomically
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import PathRefused, resolve_path
from toolcatalog.protocol import Tool, ToolContext, ToolResult


MAX_PREVIEW_BYTES = 1024 * 1024  # an existing file larger than this is not diffed for an approval


class WriteTool(Tool):
    name = "write"
    label = "write"
    description = (
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
        "Automatically creates parent directories."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
            "content": {"type": "string", "description": "Content to write to the file"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process", requires_write=True)

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        data = encode_text(args["content"], field="content")
        wp = resolve_path(ctx, args["path"])
        if args["path"].endswith("/"):
            raise PathRefused(f"Path refused: {args['path']!r} names a directory, not a file")
        ctx.check_cancelled()
        existed = write_atomically(wp, data)
        return ToolResult.text(
            f"Successfully wrote {len(data)} bytes to {wp.shown}",
            details={"bytes": len(data), "created": not existed},
        )

    def approval_preview(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """The write as a unified diff of the file as it is now (a new file: from nothing);
        None for a file that is not text or is too large to show."""
        wp = resolve_path(ctx, args["path"])
        old = ""
        if wp.exists:
            fd, st, _shown = open_regular_file(ctx, args["path"], verb="write")
            with os.fdopen(fd, "rb", closefd=True) as fh:
                if st.st_size > MAX_PREVIEW_BYTES:
                    return None
                raw = fh.read(MAX_PREVIEW_BYTES + 1)
            if looks_binary(raw[:8192]):
                return None
            try:
                old = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        diff, first_changed = unified_diff(old.replace("\r\n", "\n"), args["content"].replace("\r\n", "\n"), wp.shown)
        return {"diff": diff, "firstChangedLine": first_changed, "created": not wp.exists}
