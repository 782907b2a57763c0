"""``ls`` and ``find``: listing a directory and finding files by glob."""

from __future__ import annotations

import os
import stat
from typing import Any

from toolcatalog.globbing import compile_glob
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import WorkspacePath, resolve_path
from toolcatalog.protected_paths import protected_identities
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.truncation import DEFAULT_MAX_BYTES, format_size, truncate_head
from toolcatalog.workspace_walk import ancestor_rules, walk

LS_DEFAULT_LIMIT = 500
FIND_DEFAULT_LIMIT = 1000
FIND_MAX_VISITED = 500_000


def open_directory(ctx: ToolContext, raw: Any) -> tuple[WorkspacePath, int]:
    wp = resolve_path(ctx, raw if raw not in (None, "") else ".")
    if not wp.exists:
        raise ToolError(f"Path not found: {wp.shown}")
    if not os.path.isdir(wp.real):
        raise ToolError(f"Not a directory: {wp.shown}")
    try:
        return wp, wp.open_dir()
    except PermissionError:
        raise ToolError(f"Permission denied: {wp.shown}") from None


def finish_listing(lines: list[str], notices: list[str], details: dict[str, Any]) -> ToolResult:
    trunc = truncate_head("\n".join(lines), max_lines=2**62)
    text = trunc.content
    if trunc.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = trunc.to_details()
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return ToolResult.text(text, details=details or None)


class LsTool(Tool):
    name = "ls"
    changes = False
    label = "ls"
    description = (
        "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories and "
        f"'-> target' for symlinks. Includes dotfiles. Output is truncated to {LS_DEFAULT_LIMIT} entries or "
        f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory to list (default: current directory)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of entries to return (default: 500)"},
        },
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process")

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        limit = int(args.get("limit") or LS_DEFAULT_LIMIT)
        wp, fd = open_directory(ctx, args.get("path"))
        try:
            with os.scandir(fd) as it:
                entries = []
                for entry in it:
                    try:
                        entries.append((entry.name, entry.stat(follow_symlinks=False).st_mode))
                    except OSError:
                        continue  # vanished
            entries.sort(key=lambda e: (e[0].lower(), e[0]))
            lines = []
            limit_reached = False
            for name, mode in entries:
                if len(lines) >= limit:
                    limit_reached = True
                    break
                if stat.S_ISDIR(mode):
                    lines.append(name + "/")
                elif stat.S_ISLNK(mode):
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError:
                        target = "?"
                    lines.append(f"{name} -> {target}")
                else:
                    lines.append(name)
        finally:
            os.close(fd)
        if not lines:
            return ToolResult.text("(empty directory)")
        notices, details = [], {}
        if limit_reached:
            notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
            details["entryLimitReached"] = limit
        return finish_listing(lines, notices, details)


class FindTool(Tool):
    name = "find"
    changes = False
    label = "find"
    description = (
        "Search for files by glob pattern. Returns matching paths relative to the search directory "
        "(directories end with '/'). Respects .gitignore; includes hidden files; never follows symlinks. "
        f"Output is truncated to {FIND_DEFAULT_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB "
        "(whichever is hit first)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'",
            },
            "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of results (default: 1000)"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process")

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        glob = compile_glob(args["pattern"])
        limit = int(args.get("limit") or FIND_DEFAULT_LIMIT)
        wp, fd = open_directory(ctx, args.get("path"))
        results: list[str] = []
        limit_reached = False
        visited = 0
        try:
            rules = ancestor_rules(str(wp.root), wp.parts)
            skip = protected_identities(ctx.protected)
            for entry in walk(fd, rules=rules, prefix=wp.parts, cancel=ctx.cancel, skip=skip):
                visited += 1
                if visited > FIND_MAX_VISITED:
                    raise ToolError(f"find visited more than {FIND_MAX_VISITED} entries; narrow the path or pattern")
                if glob.matches(entry.path, entry.name):
                    if len(results) >= limit:
                        limit_reached = True
                        break
                    results.append(entry.path + ("/" if entry.kind == "dir" else ""))
        finally:
            os.close(fd)
        if not results:
            return ToolResult.text("No files found matching pattern")
        notices, details = [], {}
        if limit_reached:
            notices.append(f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern")
            details["resultLimitReached"] = limit
        return finish_listing(results, notices, details)
