"""Making JSON values storable: lone surrogates and non-finite numbers.

A Python ``str`` may hold a lone surrogate (a model's ``\\ud800`` escape, bytes
read with ``surrogateescape``); UTF-8 cannot encode it, so a database, a
renderer or a socket that meets one fails, again on every later read. A float
may be NaN or Infinity (a provider's ``1e400``); JSON has no such numbers.

Every value that enters the store goes through :func:`clean_value` first:

- each lone surrogate becomes U+FFFD (a high surrogate followed by a low one is
  one character, as JavaScript joins UTF-16 code units, and becomes that
  character); dictionary keys too;
- NaN and ±Infinity become ``null``, which is what ``JSON.stringify`` (Pi) writes
  for them, so the stored entry is the one Pi would have stored.

The walk is iterative (no recursion limit) and copies nothing when the value is
already clean (the common case: one pass over it, no allocation).
"""

from __future__ import annotations

import math
import re

__all__ = ["clean_text", "clean_value", "cleaning_reasons", "needs_cleaning"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (pairs become their character)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _bad_str(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def cleaning_reasons(value, *, first_only: bool = False) -> set[str]:
    """What :func:`clean_value` would repair in ``value``: ``lone_surrogate``, ``non_finite_number``."""
    found: set[str] = set()
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        if isinstance(item, str):
            if _bad_str(item):
                found.add("lone_surrogate")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and _bad_str(key):
                    found.add("lone_surrogate")
                if not isinstance(child, (int, bool)) and child is not None:
                    push(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            found.add("non_finite_number")
        if found and (first_only or len(found) == 2):
            break
    return found


def needs_cleaning(value) -> bool:
    """True when ``value`` holds a lone surrogate (in a string or a key) or a non-finite float."""
    return bool(cleaning_reasons(value, first_only=True))


def clean_value(value):
    """``value`` itself when it is clean, else a cleaned copy (see the module docstring)."""
    if not needs_cleaning(value):
        return value
    root: list = [None]
    # (source, target container, key in it); containers are filled in order, so
    # dictionaries keep their key order.
    stack: list[tuple] = [(value, root, 0)]
    while stack:
        source, target, key = stack.pop()
        if isinstance(source, str):
            target[key] = clean_text(source)
        elif isinstance(source, dict):
            copy: dict = {}
            target[key] = copy
            for k, child in source.items():
                k = clean_text(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((child, copy, k))
        elif isinstance(source, (list, tuple)):
            items = [None] * len(source)
            target[key] = items
            stack.extend((child, items, i) for i, child in enumerate(source))
        elif isinstance(source, float) and not isinstance(source, bool) and not math.isfinite(source):
            target[key] = None
        else:
            target[key] = source
    return root[0]
