"""The API's JSON body parser: bounded nesting, finite numbers, no lone surrogates.

DRF's own ``JSONParser`` hands the body to ``json.load``, which recurses once
per nesting level: a 10,000-level body raises ``RecursionError`` (a 500). No
request needs more than a few levels, so bodies nested deeper than
``MAX_JSON_DEPTH`` are refused with 400 ``invalid_json`` before any code of
ours walks them. ``1e400`` (infinite once parsed) and ``NaN``/``Infinity``
are refused the same way.

A lone UTF-16 surrogate escape (``"\\ud800"``: valid JSON, but no Unicode
character) cannot be encoded to UTF-8 and broke every place that wrote or
rendered it. The parser replaces each one with U+FFFD (the replacement
character), in keys and values, as text appended to a session is normalized;
the request then goes on as if the client had sent U+FFFD (a choice field
answers 400 ``invalid`` naming the field, a prompt keeps its text).

``check_json`` is the same walk for already-parsed data (the websocket's
frames use it after ``orjson.loads``).
"""

from __future__ import annotations

import codecs
import json
import math

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from sessions_tree.clean import (
    clean_text,  # the kernel's one rule: lone surrogates become U+FFFD
)

MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    def __init__(self, limit: int):
        super().__init__(f"JSON nested deeper than {limit} levels (arrays and objects); requests need far fewer")
        self.limit = limit


def check_json(value, *, limit: int = MAX_JSON_DEPTH):
    """``value`` with lone surrogates replaced in every string; ``JsonTooDeep``
    when containers nest deeper than ``limit``. Iterative: never recurses."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    # Containers are fixed in place; the stack holds (container, depth).
    stack = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            raise JsonTooDeep(limit)
        if isinstance(container, list):
            for i, item in enumerate(container):
                if isinstance(item, str):
                    container[i] = clean_text(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
        else:
            dirty = [key for key in container if isinstance(key, str) and clean_text(key) is not key]
            for key in dirty:
                container[clean_text(key)] = container.pop(key)
            for key, item in container.items():
                if isinstance(item, str):
                    container[key] = clean_text(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
    return value


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]!r} is out of range")
    return number


def _no_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str, *, limit: int = MAX_JSON_DEPTH):
    """Parse ``text`` as strict JSON (see the module doc); ``ValueError`` subclasses on bad input."""
    try:
        data = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise JsonTooDeep(limit) from None
    return check_json(data, limit=limit)


class BoundedJSONParser(JSONParser):
    """``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``: DRF's JSON parser with the bounds above."""

    def parse(self, stream, media_type=None, parser_context=None):
        from runtime.api.errors import (
            ApiError,  # errors → DRF views → the settings' parser classes
        )

        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            raw = stream.read() if stream is not None else b""
            text = codecs.decode(raw, encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding}: {exc}") from None
        try:
            return loads(text)
        except JsonTooDeep as exc:
            raise ApiError("invalid_json", str(exc), field="body") from None
        except json.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except ValueError as exc:  # out-of-range numbers, NaN, over-long integers
            raise ApiError("invalid_json", _("JSON not accepted: %(exc)s") % {"exc": exc}, field="body") from None
