"""Glob patterns for ``find`` and ``grep``'s ``glob`` filter.

Semantics as in fd/ripgrep: a pattern without ``/`` matches the file name at any
depth (``*.py``); a pattern with ``/`` matches the path relative to the search
directory (``src/**/*.spec.ts``; a leading ``/`` anchors explicitly). ``*`` and
``?`` never cross ``/``, ``**`` crosses any number of directories, ``[...]`` and
``[!...]`` are character classes, ``{a,b}`` alternatives, ``\\`` escapes.
Patterns compile to the ``regex`` engine and every match runs under a timeout,
so a pathological pattern fails with a clear error instead of hanging.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolcatalog.protocol import ToolError

if TYPE_CHECKING:
    import regex

MATCH_TIMEOUT = 0.5
MAX_PATTERN_LENGTH = 1000


class GlobError(ToolError):
    pass


def _translate(pattern: str) -> str:
    import regex  # loaded on first use: the subagent child's start-up (spawn → run_start) stays light

    out: list[str] = []
    i = 0
    n = len(pattern)
    brace_depth = 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(regex.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "*":
            if pattern.startswith("**", i):
                before_ok = i == 0 or pattern[i - 1] == "/"
                after = pattern[i + 2] if i + 2 < n else ""
                if before_ok and after == "/":
                    out.append("(?:[^/]*/)*")  # zero or more whole directories
                    i += 3
                    continue
                if before_ok and after == "":
                    out.append(".*")
                    i += 2
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
            i += 1
            continue
        if c == "?":
            out.append("[^/]")
            i += 1
            continue
        if c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(regex.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\")
            out.append(f"[^/{body}]" if negate else f"[{body}]")
            i = j + 1
            continue
        if c == "{":
            brace_depth += 1
            out.append("(?:")
            i += 1
            continue
        if c == "}" and brace_depth:
            brace_depth -= 1
            out.append(")")
            i += 1
            continue
        if c == "," and brace_depth:
            out.append("|")
            i += 1
            continue
        out.append(regex.escape(c))
        i += 1
    if brace_depth:
        raise GlobError(f"glob pattern {pattern!r} has an unclosed '{{'")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Glob:
    pattern: str
    by_path: bool
    compiled: regex.Pattern

    def matches(self, relative_path: str, name: str) -> bool:
        subject = relative_path if self.by_path else name
        try:
            return self.compiled.fullmatch(subject, timeout=MATCH_TIMEOUT) is not None
        except TimeoutError:
            raise GlobError(f"glob pattern {self.pattern!r} is too complex to match") from None


def compile_glob(pattern: str) -> Glob:
    import regex  # loaded on first use: the subagent child's start-up (spawn → run_start) stays light

    if not isinstance(pattern, str) or not pattern.strip():
        raise GlobError("glob pattern is empty")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise GlobError(f"glob pattern is longer than {MAX_PATTERN_LENGTH} characters")
    if "\x00" in pattern:
        raise GlobError("glob pattern contains a NUL byte")
    stripped = pattern[1:] if pattern.startswith("/") else pattern
    if stripped.startswith("./"):
        stripped = stripped[2:]
    by_path = "/" in stripped or pattern.startswith("/")
    try:
        compiled = regex.compile(_translate(stripped), regex.DOTALL)
    except regex.error as exc:
        raise GlobError(f"glob pattern {pattern!r} is invalid: {exc}") from None
    return Glob(pattern=pattern, by_path=by_path, compiled=compiled)
