"""The CPUs child processes start on when the web process is pinned to one (``infra/cpu_pin.py``).

A child starts with the CPUs of the thread that starts it. A pinned web process
would hand its one CPU to every tool command, subagent and MCP server (``nproc`` in
a tool would say 1, a build would run on one CPU beside the server), so the places
that start children widen the starting thread to the CPUs the process had before it
was pinned: ``spawning()`` around one start (a tool's command, from a turn's thread),
``unpin_thread()`` for a thread that starts children for its whole life (a subagent's
supervisor, the MCP connections' loop). Nothing happens in a process that is not pinned.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

#: The CPUs the process had before it was pinned (None: not pinned).
_wide: frozenset[int] | None = None


def remember_wide(cpus: Iterable[int]) -> None:
    """Called by the pinning, before it narrows anything: the set children get."""
    global _wide
    _wide = frozenset(cpus)


def wide() -> frozenset[int] | None:
    return _wide


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around starting a child process: the calling thread, and so the child, on the CPUs
    the process had before it was pinned; the thread's own set again afterwards."""
    if _wide is None:
        yield
        return
    narrow = os.sched_getaffinity(0)
    os.sched_setaffinity(0, _wide)
    try:
        yield
    finally:
        os.sched_setaffinity(0, narrow)


def unpin_thread() -> None:
    """The calling thread (and whatever it starts) on the CPUs the process had before it was pinned."""
    if _wide is not None:
        os.sched_setaffinity(0, _wide)
