"""Copies of values that JSON over UTF-8 can carry, for whatever sends stored content out
(the API's renderer, the channel layer's messages).

Stored content is lossless, so it can hold what JSON-over-UTF-8 cannot carry: lone
surrogates, non-finite numbers, nesting deeper than Python's recursion limit. The repair:
lone surrogates become U+FFFD, ``NaN``/``Infinity`` become ``null``, and containers nested
deeper than the limit are replaced by the string ``"[nested too deep]"``. The stored data is
never changed; the repair is only in what is sent.
"""

from __future__ import annotations

import math

from rest_framework.utils.encoders import JSONEncoder

from sessions_tree.clean import clean_text

MAX_RENDER_DEPTH = 512


TOO_DEEP = "[nested too deep]"


def renderable(value, *, limit: int = MAX_RENDER_DEPTH):
    """A copy of ``value`` that JSON over UTF-8 can carry (see the module doc). Iterative."""
    root: list = [None]
    # (source, parent container, key in parent, depth)
    stack = [(value, root, 0, 0)]
    while stack:
        item, parent, key, depth = stack.pop()
        if isinstance(item, str):
            parent[key] = clean_text(item)
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            parent[key] = item
        elif isinstance(item, float):
            parent[key] = item if math.isfinite(item) else None
        elif isinstance(item, dict):
            if depth >= limit:
                parent[key] = TOO_DEEP
                continue
            copy: dict = {}
            parent[key] = copy
            for k, v in item.items():
                name = clean_text(k) if isinstance(k, str) else str(k)
                copy[name] = None
                stack.append((v, copy, name, depth + 1))
        elif isinstance(item, (list, tuple)):
            if depth >= limit:
                parent[key] = TOO_DEEP
                continue
            copy_list = [None] * len(item)
            parent[key] = copy_list
            for i, v in enumerate(item):
                stack.append((v, copy_list, i, depth + 1))
        else:  # dates, UUIDs, decimals …: as DRF's encoder would, then made safe
            parent[key] = _safe_scalar(item)
    return root[0]


def _safe_scalar(item):
    try:
        value = JSONEncoder().default(item)
    except TypeError:
        value = str(item)
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
