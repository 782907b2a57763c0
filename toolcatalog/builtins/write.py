"""``write``: create or overwrite a file (parent directories are created)."""

from __future__ import annotations

from typing import Any

from toolcatalog.builtins.edit import read_text_file, unified_diff
from toolcatalog.file_writes import encode_text, write_atomically
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import PathRefused, resolve_path
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult


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
        if args["path"].endswith("/"):
            raise PathRefused(f"Path refused: {args['path']!r} names a directory, not a file")
        old = ""
        if wp.exists:
            try:
                old, _st, _shown = read_text_file(ctx, args["path"], verb="write", max_bytes=MAX_PREVIEW_BYTES)
            except PathRefused:
                raise
            except ToolError:  # too large, binary or not UTF-8: the request shows the content alone
                return None
        diff, first_changed = unified_diff(old.replace("\r\n", "\n"), args["content"].replace("\r\n", "\n"), wp.shown)
        return {"diff": diff, "firstChangedLine": first_changed, "created": not wp.exists}
