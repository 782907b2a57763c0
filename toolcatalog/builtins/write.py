"""``write``: create or overwrite a file (parent directories are created)."""

from __future__ import annotations

from typing import Any

from toolcatalog.file_writes import encode_text, write_atomically
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import PathRefused, resolve_path
from toolcatalog.protocol import Tool, ToolContext, ToolResult


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
