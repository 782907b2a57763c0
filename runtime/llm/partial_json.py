"""Best-effort parsing of a JSON object that is still arriving (streamed tool arguments).

`PartialJson` keeps the text received so far and a small scanner state (open
brackets, inside a string or not, position of the last comma per bracket), updated
only over each new delta. `value()` returns the complete parse when the text is
complete, otherwise the prefix closed off at the last point where it is valid: an
unfinished string value is cut and closed, an unfinished key, number or literal is
dropped. It never raises; it returns None when nothing usable has arrived.
"""

from __future__ import annotations

import json

_CLOSERS = {"{": "}", "[": "]"}

# Above this size the arguments are re-parsed only after 10 % growth, so a large
# streamed argument (a file body for `write`) costs O(n) in total, not O(n^2).
_EAGER_LIMIT = 16 * 1024


class PartialJson:
    __slots__ = ("_parts", "_length", "_stack", "_in_string", "_escape", "_parsed_at", "_last")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        # One entry per open bracket: [char, index after the bracket, index of its last comma or -1].
        self._stack: list[list] = []
        self._in_string = False
        self._escape = False
        self._parsed_at = -1
        self._last = None

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def feed(self, delta: str) -> None:
        if not delta:
            return
        base = self._length
        stack = self._stack
        in_string = self._in_string
        escape = self._escape
        for offset, ch in enumerate(delta):
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{" or ch == "[":
                stack.append([ch, base + offset + 1, -1])
            elif ch == "}" or ch == "]":
                if stack:
                    stack.pop()
            elif ch == ",":
                if stack:
                    stack[-1][2] = base + offset
        self._in_string = in_string
        self._escape = escape
        self._parts.append(delta)
        self._length += len(delta)

    def value(self, *, force: bool = False):
        """The best parse of the text so far (cached; cheap when nothing changed)."""
        length = self._length
        if length == self._parsed_at:
            return self._last
        if not force and length > _EAGER_LIMIT and self._parsed_at > 0 and length < self._parsed_at * 1.1:
            return self._last
        self._parsed_at = length
        text = self.text
        try:
            self._last = json.loads(text)
            return self._last
        except ValueError:
            pass
        parsed = self._repair(text)
        if parsed is not None:
            self._last = parsed
        return self._last

    def _repair(self, text: str):
        closers = "".join(_CLOSERS[frame[0]] for frame in reversed(self._stack))
        candidates = []
        if self._in_string:
            body = text[:-1] if self._escape else text
            # A cut \uXXXX escape cannot be closed; drop it.
            cut = body.rfind("\\u")
            if cut != -1 and len(body) - cut < 6 and (cut == 0 or body[cut - 1] != "\\"):
                body = body[:cut]
            candidates.append(body + '"' + closers)
        else:
            candidates.append(text.rstrip().rstrip(",") + closers)
        if self._stack:
            _, opened_at, comma_at = self._stack[-1]
            if comma_at >= 0:
                candidates.append(text[:comma_at] + closers)
            candidates.append(text[:opened_at] + closers)
        for candidate in candidates:
            try:
                return json.loads(candidate)
            except ValueError:
                continue
        return None


def parse_arguments(text: str):
    """Final parse of complete tool-call arguments: a dict, or the best partial dict, or {}."""
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        partial = PartialJson()
        partial.feed(text)
        value = partial.value(force=True)
    return value if isinstance(value, dict) else {}
