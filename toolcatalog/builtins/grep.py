"""``grep``: search file contents (regex or literal), with a glob filter and context lines.

Output lines are ``path:N: text`` for matches and ``path-N- text`` for context,
as in Pi. Respects .gitignore, includes hidden files, skips binary files and
never follows symlinks while walking. Patterns use the ``regex`` engine
(Python/PCRE-like syntax) and every line is matched under a timeout, so a
catastrophic pattern returns an error instead of hanging the run.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from typing import TYPE_CHECKING, Any

from toolcatalog.builtins.listing import finish_listing
from toolcatalog.file_kinds import SNIFF_BYTES, looks_binary
from toolcatalog.globbing import compile_glob
from toolcatalog.manifest import ToolManifest
from toolcatalog.paths import resolve_path
from toolcatalog.protected_paths import protected_identities, refuse_hard_link
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.truncation import (
    DEFAULT_MAX_BYTES,
    GREP_MAX_LINE_LENGTH,
    truncate_line,
)
from toolcatalog.workspace_walk import ancestor_rules, walk

if TYPE_CHECKING:
    import regex

DEFAULT_LIMIT = 100
MAX_CONTEXT = 50
MATCH_TIMEOUT = 0.5
MAX_PATTERN_LENGTH = 2000
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 200_000


class _FileSearch:
    """Matches in one file, with context lines merged when blocks overlap."""

    def __init__(self, pattern: regex.Pattern, context: int, shown: str) -> None:
        self.pattern = pattern
        self.context = context
        self.shown = shown
        self.lines_truncated = False

    def _format(self, number: int, text: str, is_match: bool) -> str:
        text = text.rstrip("\r")
        cut, was_cut = truncate_line(text, GREP_MAX_LINE_LENGTH)
        self.lines_truncated |= was_cut
        sep = ":" if is_match else "-"
        return f"{self.shown}{sep}{number}{sep} {cut}"

    def search(self, fh, ctx: ToolContext, budget: int) -> tuple[list[str], int]:
        out: list[str] = []
        matches = 0
        before: deque[tuple[int, str]] = deque(maxlen=self.context)
        printed_upto = 0
        after_left = 0
        for number, raw in enumerate(fh, start=1):
            if number % 4096 == 0:
                ctx.check_cancelled()
            text = raw.decode("utf-8", "replace").rstrip("\n")
            try:
                hit = self.pattern.search(text, timeout=MATCH_TIMEOUT) is not None
            except TimeoutError:
                raise ToolError(
                    f"grep pattern is too slow on {self.shown}:{number} (catastrophic backtracking?); "
                    "simplify it or use literal=true"
                ) from None
            if hit:
                if matches >= budget:
                    return out, matches + 1  # one more than allowed: the caller reports the limit
                for n, t in before:
                    if n > printed_upto:
                        out.append(self._format(n, t, False))
                before.clear()
                out.append(self._format(number, text, True))
                printed_upto = number
                matches += 1
                after_left = self.context
            elif after_left > 0:
                out.append(self._format(number, text, False))
                printed_upto = number
                after_left -= 1
            elif self.context:
                before.append((number, text))
        return out, matches


class GrepTool(Tool):
    name = "grep"
    changes = False
    label = "grep"
    description = (
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. "
        f"Respects .gitignore. Output is truncated to {DEFAULT_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB "
        f"(whichever is hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "description": "Search pattern (regex or literal string)"},
            "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
            "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
            "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
            "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CONTEXT,
                "description": "Number of lines to show before and after each match (default: 0)",
            },
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of matches to return (default: 100)"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process")

    def _compile(self, args: dict[str, Any]) -> regex.Pattern:
        import regex  # loaded on first use: the subagent child's start-up (spawn → run_start) stays light

        pattern = args["pattern"]
        if len(pattern) > MAX_PATTERN_LENGTH:
            raise ToolError(f"grep pattern is longer than {MAX_PATTERN_LENGTH} characters")
        source = regex.escape(pattern) if args.get("literal") else pattern
        flags = regex.V0 | (regex.IGNORECASE if args.get("ignoreCase") else 0)
        try:
            return regex.compile(source, flags)
        except regex.error as exc:
            raise ToolError(f"Invalid regex {pattern!r}: {exc}. Use literal=true to search for the text itself.") from None

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        compiled = self._compile(args)
        glob = compile_glob(args["glob"]) if args.get("glob") else None
        context = int(args.get("context") or 0)
        limit = int(args.get("limit") or DEFAULT_LIMIT)
        wp = resolve_path(ctx, args.get("path") or ".")
        if not wp.exists:
            raise ToolError(f"Path not found: {wp.shown}")
        out: list[str] = []
        total = 0
        limit_reached = False
        lines_truncated = False
        hard_linked: list[str] = []

        def search_fd(fd: int, shown: str) -> None:
            nonlocal total, limit_reached, lines_truncated
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return
            if st.st_nlink > 1:  # may be a file outside the workspace (protected_paths)
                hard_linked.append(shown)
                return
            with os.fdopen(fd, "rb", closefd=False) as fh:
                if looks_binary(fh.read(SNIFF_BYTES)):
                    return
                fh.seek(0)
                searcher = _FileSearch(compiled, context, shown)
                lines, found = searcher.search(fh, ctx, limit - total)
            lines_truncated |= searcher.lines_truncated
            out.extend(lines)
            if found > limit - total:
                limit_reached = True
                total = limit
            else:
                total += found

        if not os.path.isdir(wp.real):
            fd = wp.open_file(os.O_RDONLY | os.O_NONBLOCK)
            try:
                refuse_hard_link(os.fstat(fd), wp.shown, verb="search")
                search_fd(fd, os.path.basename(wp.real))
            finally:
                os.close(fd)
        else:
            dir_fd = wp.open_dir()
            files = 0
            try:
                rules = ancestor_rules(str(wp.root), wp.parts)
                skip = protected_identities(ctx.protected)
                for entry in walk(dir_fd, rules=rules, prefix=wp.parts, cancel=ctx.cancel, skip=skip):
                    if entry.kind != "file":
                        continue
                    if glob is not None and not glob.matches(entry.path, entry.name):
                        continue
                    files += 1
                    if files > MAX_FILES:
                        raise ToolError(f"grep searched more than {MAX_FILES} files; narrow the path or glob")
                    try:
                        fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                     dir_fd=entry.dir_fd)
                    except OSError:
                        continue  # vanished or became a symlink: skip
                    try:
                        search_fd(fd, entry.path)
                    finally:
                        os.close(fd)
                    if limit_reached:
                        break
            finally:
                os.close(dir_fd)
        notices: list[str] = []
        details: dict[str, Any] = {}
        if hard_linked:
            notices.append(
                f"{len(hard_linked)} hard-linked file(s) not searched (a hard link may be a file outside the workspace)"
            )
            details["hardLinkedSkipped"] = hard_linked[:20]
        if total == 0:
            text = "No matches found" + (f"\n\n[{notices[0]}]" if notices else "")
            return ToolResult.text(text, details=details or None)
        if limit_reached:
            notices.append(f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern")
            details["matchLimitReached"] = limit
        result = finish_listing(out, notices, details)
        if lines_truncated:
            text = result.content[0]["text"]
            note = f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
            if text.endswith("]") and "\n\n[" in text:
                text = text[:-1] + f". {note}]"
            else:
                text += f"\n\n[{note}]"
            result.content[0]["text"] = text
            result.details = dict(result.details or {}, linesTruncated=True)
        return result
