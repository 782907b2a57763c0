"""JSON text exactly as Pi (JavaScript) reads and writes it.

Pi writes every session line with ``JSON.stringify(entry)`` and reads it back with
``JSON.parse``. Python's ``json`` differs in ways that show up in real files (see
pi-session-format.md §15): number formatting (``5.0``, ``9e-06``, ``-0.0``), lone
surrogates, and JavaScript's key order for integer-like keys (``{"b":1,"2":2}`` is
``{"2":2,"b":1}`` once JavaScript has parsed it). This module is the one place that
knows those rules:

- :func:`dumps` / :func:`dumps_pretty` give the bytes ``JSON.stringify(value)`` /
  ``JSON.stringify(value, null, 2) + "\\n"`` give for the same value;
- :func:`loads` parses like ``JSON.parse`` (orjson first, stdlib for what orjson
  refuses but JavaScript accepts);
- :func:`parse_session_text` is Pi's tolerant whole-file parse (§5), keeping each
  entry's raw line so an entry that came in from a file can go out byte for byte.

Plain Python, no Django.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

import orjson

__all__ = [
    "JS_WHITESPACE",
    "Diagnostic",
    "ParsedSession",
    "dumps",
    "dumps_pretty",
    "js_number_text",
    "js_to_string",
    "js_trim",
    "loads",
    "parse_session_text",
]

# JavaScript's String.prototype.trim() strips WhiteSpace and LineTerminator code
# points: TAB, VT, FF, ZWNBSP (BOM), the Unicode "Zs" spaces, LF, CR, LS, PS.
JS_WHITESPACE = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_MAX_SAFE = 2**53  # integers beyond this are rounded by JavaScript's Number
_MAX_ARRAY_INDEX = 2**32 - 2  # largest key JavaScript orders as an integer index
_SURROGATE = re.compile("[\ud800-\udfff]")
_INDEX_FIRST = frozenset("0123456789")
# Nesting deeper than this goes through the iterative encoder (orjson stops at 1024).
_FAST_DEPTH = 400
_DICT_ITEMS = type({}.items())


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it (also strips a BOM and Unicode spaces)."""
    return text.strip(JS_WHITESPACE)


# --------------------------------------------------------------------------- numbers


def js_number_text(value: float | int) -> str:
    """``String(value)`` for a finite JavaScript number (Number::toString, radix 10).

    Python's ``repr`` and JavaScript both print the shortest digit string that
    round-trips; they differ only in when they switch to exponent notation
    (JavaScript: below 1e-6 or from 1e21 on) and in ``5.0``/``-0.0``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            raise ValueError("integer too large for a JavaScript number") from None
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    if value == 0:
        return "0"  # also -0.0
    sign = "-" if value < 0 else ""
    _, digit_tuple, exp = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k = len(digits)
    n = exp + k  # the value is 0.DIGITS x 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp_part = ("e+" if e >= 0 else "e-") + str(abs(e))
    if k == 1:
        return sign + digits + exp_part
    return sign + digits[0] + "." + digits[1:] + exp_part


def _json_number(value) -> str:
    """A number as JSON.stringify writes it (non-finite numbers become ``null``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "null"
    if isinstance(value, int) and not (-_MAX_SAFE <= value <= _MAX_SAFE):
        try:
            as_float = float(value)
        except OverflowError:
            return "null"  # JavaScript would have parsed it as Infinity
        return js_number_text(as_float)
    return js_number_text(value)


def js_to_string(value) -> str:
    """JavaScript's ``String(value)`` for JSON values (``undefined`` is :data:`UNDEFINED`)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if isinstance(value, float) and math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return _json_number(value) if isinstance(value, int) else js_number_text(value)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None or v is UNDEFINED else js_to_string(v) for v in value)
    return "[object Object]"


class _Undefined:
    """JavaScript's ``undefined``: omitted from objects, ``null`` in arrays."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED = _Undefined()


# --------------------------------------------------------------------------- strings


def _js_quote(text: str) -> str:
    """A JSON string literal as JSON.stringify writes it, lone surrogates escaped."""
    if _SURROGATE.search(text):
        # A high surrogate followed by a low one is one character to JavaScript
        # (UTF-16 code units); join such pairs, escape the rest as \\udxxx.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        quoted = json.encoder.encode_basestring(text)
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)
    return json.encoder.encode_basestring(text)


def _is_index_key(key: str) -> bool:
    """True for keys JavaScript orders first, ascending (canonical array indices)."""
    if key == "0":
        return True
    return key[0] != "0" and key.isascii() and key.isdigit() and int(key) <= _MAX_ARRAY_INDEX


def _ordered_items(obj: dict):
    """``obj``'s items in JavaScript property order (integer indices first)."""
    index_keys = None
    for key in obj:
        if type(key) is not str:
            raise TypeError(f"JSON object keys must be strings, not {type(key).__name__} ({key!r})")
        if key and key[0] in _INDEX_FIRST and _is_index_key(key):
            if index_keys is None:
                index_keys = []
            index_keys.append(key)
    if index_keys is None:
        return obj.items()
    index_keys.sort(key=int)
    first = set(index_keys)
    return [(k, obj[k]) for k in index_keys] + [(k, v) for k, v in obj.items() if k not in first]


# --------------------------------------------------------------------------- dumps


class _TooDeep(Exception):
    pass


def _prepare(value, depth: int):
    """``value`` made safe for orjson with JavaScript's output.

    Returns ``value`` itself when nothing needs changing; containers are copied
    only along the paths to values that do (copy on write). Floats become ints
    (integral, exact) or pre-rendered fragments; strings with surrogates and
    out-of-range integers become fragments; integer-like keys are moved first.
    """
    t = type(value)
    if t is str:
        if _SURROGATE.search(value):
            return orjson.Fragment(_js_quote(value))
        return value
    if t is dict:
        if depth > _FAST_DEPTH:
            raise _TooDeep
        items = _ordered_items(value)
        out = None if items.__class__ is _DICT_ITEMS else {}
        for i, (k, v) in enumerate(items):
            nv = UNDEFINED if v is UNDEFINED else _prepare(v, depth + 1)
            if out is None:
                if nv is v and nv is not UNDEFINED:
                    continue
                out = {}
                for k2, v2 in list(value.items())[:i]:
                    out[k2] = v2
            if nv is not UNDEFINED:
                out[k] = nv
        return value if out is None else out
    if t is list or t is tuple:
        if depth > _FAST_DEPTH:
            raise _TooDeep
        out = None
        for i, v in enumerate(value):
            nv = None if v is UNDEFINED else _prepare(v, depth + 1)
            if nv is not v and out is None:
                out = list(value[:i])
            if out is not None:
                out.append(nv)
        return out if out is not None else value
    if t is int:
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return value
        return orjson.Fragment(_json_number(value))
    if t is float:
        if value.is_integer() and -_MAX_SAFE <= value <= _MAX_SAFE:
            return int(value)
        return orjson.Fragment(_json_number(value))
    if value is None or t is bool or t is orjson.Fragment:  # a fragment is JSON already
        return value
    return _prepare(_plain(value), depth)


def _plain(value):
    """Subclasses of the JSON types as their base type; anything else is an error."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encode_iterative(value, indent: bool) -> str:
    """The same text as the fast path, without recursion (for very deep values)."""
    parts: list[str] = []
    # Stack of pending work: ("v", value, level) to encode a value, ("s", text) literal.
    stack: list[tuple] = [("v", value, 0)]
    nl = "\n" if indent else ""
    sep = ": " if indent else ":"
    while stack:
        item = stack.pop()
        if item[0] == "s":
            parts.append(item[1])
            continue
        _, v, level = item
        if v is UNDEFINED or v is None:
            parts.append("null")
            continue
        t = type(v)
        if t is str:
            parts.append(_js_quote(v))
        elif v is True:
            parts.append("true")
        elif v is False:
            parts.append("false")
        elif t is int or t is float:
            parts.append(_json_number(v))
        elif t is dict:
            items = [(k, x) for k, x in _ordered_items(v) if x is not UNDEFINED]
            if not items:
                parts.append("{}")
                continue
            pad = "  " * (level + 1) if indent else ""
            todo: list[tuple] = [("s", "{" + nl)]
            for i, (k, x) in enumerate(items):
                todo.append(("s", ("," + nl if i else "") + pad + _js_quote(k) + sep))
                todo.append(("v", x, level + 1))
            todo.append(("s", nl + ("  " * level if indent else "") + "}"))
            stack.extend(reversed(todo))
        elif t is list or t is tuple:
            if not v:
                parts.append("[]")
                continue
            pad = "  " * (level + 1) if indent else ""
            todo = [("s", "[" + nl)]
            for i, x in enumerate(v):
                todo.append(("s", ("," + nl if i else "") + pad))
                todo.append(("v", x, level + 1))
            todo.append(("s", nl + ("  " * level if indent else "") + "]"))
            stack.extend(reversed(todo))
        else:
            stack.append(("v", _plain(v), level))
    return "".join(parts)


def dumps(obj) -> str:
    """``JSON.stringify(obj)``: compact, key order kept (integer-like keys first, as
    JavaScript orders them), non-ASCII as raw UTF-8, JavaScript number formatting
    (``5.0`` -> ``5``, ``-0.0`` -> ``0``, ``9e-06`` -> ``0.000009``, ``1e21`` ->
    ``1e+21``), lone surrogates escaped as ``\\udxxx``, NaN/Infinity as ``null``.

    Raises TypeError for values JSON cannot hold (non-string keys, other types).
    """
    try:
        prepared = _prepare(obj, 0)
    except _TooDeep:
        return _encode_iterative(obj, indent=False)
    if prepared is UNDEFINED:
        raise TypeError("undefined is not JSON serializable")
    try:
        return orjson.dumps(prepared).decode()
    except TypeError:  # e.g. a lone surrogate in a key: the slow path handles it
        return _encode_iterative(obj, indent=False)


def dumps_pretty(obj) -> str:
    """``JSON.stringify(obj, null, 2) + "\\n"``, as the Pi oracle prints its results."""
    try:
        prepared = _prepare(obj, 0)
    except _TooDeep:
        return _encode_iterative(obj, indent=True) + "\n"
    try:
        return orjson.dumps(prepared, option=orjson.OPT_INDENT_2).decode() + "\n"
    except TypeError:
        return _encode_iterative(obj, indent=True) + "\n"


# --------------------------------------------------------------------------- loads


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_scanstring = json.decoder.scanstring


def _object_key(text: str, pos: int) -> tuple[str, int]:
    """The key starting at ``pos`` (a string, then ``:``) and where its value starts."""
    if pos >= len(text) or text[pos] != '"':
        raise ValueError(f"expected a key at {pos}")
    key, pos = _scanstring(text, pos + 1, True)
    pos = _WS.match(text, pos).end()
    if pos >= len(text) or text[pos] != ":":
        raise ValueError(f"expected ':' at {pos}")
    return key, _WS.match(text, pos + 1).end()


def _loads_deep(text: str):
    """``JSON.parse`` without a nesting limit (iterative), for what the C parsers refuse as too deep.

    Slow (pure Python) but only used for the rare value nested deeper than
    orjson's 1024 levels / Python's recursion limit: JavaScript's parser has no
    such limit, and Pi keeps those lines.
    """
    n = len(text)
    pos = _WS.match(text, 0).end()
    stack: list = []  # containers being filled; for a dict, (dict, pending key)
    keys: list = []
    value = None
    while True:
        if pos >= n:
            raise ValueError("unexpected end of JSON input")
        c = text[pos]
        # ---- a value starts at pos
        if c == "{" or c == "[":
            pos = _WS.match(text, pos + 1).end()
            if c == "{":
                if pos < n and text[pos] == "}":
                    value, pos = {}, pos + 1
                else:
                    key, pos = _object_key(text, pos)
                    stack.append({})
                    keys.append(key)
                    continue
            else:
                if pos < n and text[pos] == "]":
                    value, pos = [], pos + 1
                else:
                    stack.append([])
                    keys.append(None)
                    continue
        elif c == '"':
            value, pos = _scanstring(text, pos + 1, True)
        elif text.startswith("true", pos):
            value, pos = True, pos + 4
        elif text.startswith("false", pos):
            value, pos = False, pos + 5
        elif text.startswith("null", pos):
            value, pos = None, pos + 4
        else:
            m = _NUMBER.match(text, pos)
            if m is None:
                raise ValueError(f"unexpected character at {pos}")
            value = float(m.group()) if m.group(1) or m.group(2) else int(m.group())
            pos = m.end()
        # ---- a value is complete: put it into its container, closing what ends here
        while True:
            pos = _WS.match(text, pos).end()
            if not stack:
                if pos != n:
                    raise ValueError(f"extra data at {pos}")
                return value
            container = stack[-1]
            if type(container) is dict:
                container[keys[-1]] = value
            else:
                container.append(value)
            if pos >= n:
                raise ValueError("unexpected end of JSON input")
            c = text[pos]
            if c == ",":
                pos = _WS.match(text, pos + 1).end()
                if type(container) is dict:
                    keys[-1], pos = _object_key(text, pos)
                break  # the next value
            if c == ("}" if type(container) is dict else "]"):
                value = stack.pop()
                keys.pop()
                pos += 1
                continue
            raise ValueError(f"expected ',' or a closing bracket at {pos}")


def loads(data: str | bytes):
    """``JSON.parse(data)``: orjson, falling back to the stdlib decoder for what orjson
    refuses but JavaScript accepts (lone-surrogate escapes, numbers that overflow to
    Infinity), and to an iterative parser for values nested too deeply for either.
    Raises ValueError for text that is not JSON.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        first_error = exc
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"not UTF-8: {first_error}") from None
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except RecursionError:
        pass
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    try:
        return _loads_deep(data)
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueError(str(exc)) from None


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class Diagnostic:
    """Something :func:`parse_session_text` skipped or dropped, with its line number."""

    line: int  # 1-based line number in the original text
    kind: str  # "malformed" | "not_an_object" | "extra_header" | "torn_tail"
    message: str


@dataclass
class ParsedSession:
    """Result of :func:`parse_session_text`.

    ``entries[i]`` came from the line ``raw_lines[i]`` (without its line break) at
    line number ``line_numbers[i]``; ``positions[i]`` is its index among the JSON
    values Pi parsed (the header is 0), which the v1 migration needs (§4).
    """

    header: dict | None
    header_error: str | None
    entries: list[dict] = field(default_factory=list)
    raw_lines: list[str] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    header_line: str | None = None
    # Header ``version`` as written (1 when missing, None without a header object).
    file_version: object = None

    @property
    def skipped_lines(self) -> int:
        return sum(1 for d in self.diagnostics if d.kind in ("malformed", "not_an_object", "torn_tail"))


def _excerpt(line: str, limit: int = 60) -> str:
    return line if len(line) <= limit else line[:limit] + "…"


def parse_session_text(text: str) -> ParsedSession:
    """Pi's tolerant parse of a whole session file (pi-session-format.md §5).

    The text is trimmed like JavaScript's ``trim()`` (which also removes a BOM) and
    split on ``"\\n"``; blank lines are skipped; lines that do not parse are skipped
    and reported (``malformed``, or ``torn_tail`` for an unterminated last line).
    The header is the first parsed value; it must be an object with
    ``type: "session"`` and a string ``id`` (else ``header`` is None and
    ``header_error`` says why; ``entries`` still holds what parsed). Later
    ``type: "session"`` lines are dropped from the entries, as Pi does.

    Differences from Pi: a line whose JSON is not an object (``42``, ``null``) is
    skipped and reported; Pi keeps it as an "entry" and then misbehaves or throws.
    """
    stripped = js_trim(text)  # returns ``text`` itself when there is nothing to strip
    first_line = 1
    if stripped is not text and stripped:
        lead = len(text) - len(text.lstrip(JS_WHITESPACE))
        first_line += text.count("\n", 0, lead)
    # The last line is unterminated when no "\n" follows its last character.
    unterminated = "\n" not in text[len(text.rstrip(JS_WHITESPACE)) :]
    result = ParsedSession(header=None, header_error=None)
    if not stripped:
        result.header_error = "the file is empty"
        return result
    lines = stripped.split("\n")
    last = len(lines) - 1
    position = 0  # index among parsed values, as Pi's fileEntries
    seen_first = False
    entries = result.entries
    raw_lines = result.raw_lines
    line_numbers = result.line_numbers
    positions = result.positions
    for number, line in enumerate(lines):
        if not line or (line[0] in JS_WHITESPACE and not line.strip(JS_WHITESPACE)):
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:
                value = loads(line)
            except ValueError as exc:
                torn = number == last and unterminated
                result.diagnostics.append(
                    Diagnostic(
                        first_line + number,
                        "torn_tail" if torn else "malformed",
                        f"{'unterminated last line' if torn else 'not valid JSON'} ({exc}): {_excerpt(line)!r}",
                    )
                )
                continue
        lineno = first_line + number
        if not seen_first:
            seen_first = True
            problem = _header_problem(value)
            if problem is None:
                result.header = value
                result.header_line = line[:-1] if line.endswith("\r") else line
                version = value.get("version")
                result.file_version = 1 if version is None else version
                position += 1
                continue
            result.header_error = f"line {lineno}: {problem}"
            if isinstance(value, dict) and value.get("type") == "session":
                version = value.get("version")
                result.file_version = 1 if version is None else version
        if type(value) is not dict:
            result.diagnostics.append(
                Diagnostic(lineno, "not_an_object", f"JSON value is not an object: {_excerpt(line)!r}")
            )
            position += 1
            continue
        if value.get("type") == "session":
            if result.header is not None:
                result.diagnostics.append(
                    Diagnostic(lineno, "extra_header", "another session header; Pi keeps the first one")
                )
            position += 1
            continue
        entries.append(value)
        raw_lines.append(line[:-1] if line.endswith("\r") else line)
        line_numbers.append(lineno)
        positions.append(position)
        position += 1
    if not seen_first:
        result.header_error = "no line of the file is valid JSON"
    return result


def _header_problem(value) -> str | None:
    if type(value) is not dict:
        return f"the first JSON value is not a session header object ({type(value).__name__})"
    if value.get("type") != "session":
        return f"the first JSON object is not a session header (type {value.get('type')!r})"
    if not isinstance(value.get("id"), str):
        return "the session header has no string id"
    return None
