"""Answers that cost file-system calls, reused for a few seconds.

A tool context is built for every round of tool calls, and some of what it needs does
not change from one to the next in practice (where the protected paths really are,
where bwrap is on ``PATH``) but may change on disk at any time. ``recent`` keeps such an
answer for ``seconds`` per key: a different key (new settings, another ``PATH``) is
computed at once, a change on disk is seen when the answer's time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


def recent(memory: dict, key: Hashable, seconds: float, compute: Callable[[], T], *, limit: int = 64) -> T:
    """``compute()``'s answer for ``key``, reused while younger than ``seconds``; ``memory``
    (the caller's dict) is emptied when it holds ``limit`` keys."""
    now = time.monotonic()
    known = memory.get(key)
    if known is not None and now - known[0] < seconds:
        return known[1]
    value = compute()
    if len(memory) >= limit:
        memory.clear()
    memory[key] = (now, value)
    return value
