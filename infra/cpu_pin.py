"""One CPU for the threads of the embedded web process.

CPython runs one thread at a time (the GIL). The embedded web process (inline task
backend) runs many: the event loop serving HTTP and sockets, the threads of the
synchronous views, and one thread per running turn, each waking for its model's
stream, its database statements and its tree writes. Every wake-up takes the
interpreter from another thread. When those threads are spread over several CPUs,
each hand-over wakes a thread on another CPU (an inter-processor interrupt; in a
virtual machine a trip through the hypervisor) and moves the data they share
between CPU caches: with 50 sessions the process did ~1,400 context switches a turn
and spent a third of its CPU in the kernel switching tasks. On one CPU the hand-over
stays local, and a GIL-bound process loses nothing it had (it ran one thread at a
time anyway): 50 sessions of the scripted model went from 48-50 to 30-33 ms of CPU
a turn and from 18.8 to 22 turns/s on a 2-CPU machine (bench/README.md).

``pin()`` (``neta.serve`` calls it once the application is built) puts every thread
of the process on one CPU; a thread started later inherits its creator's CPUs, so
the whole process stays there. ``NETA_WEB_CPU``: ``auto`` (the default) pins the
embedded server (inline backend) to the CPU it is running on at that moment when it
may use more than one, and leaves a server whose turns run in Celery workers alone;
``off`` never pins; a number pins to that CPU (it must be one the process may use).

Children get the CPUs the process had before (a child starts with its creator
thread's CPUs): ``infra.cpu_affinity`` keeps that set, and the places that start
children (a tool's command, a subagent's supervisor, an MCP server's connection)
widen the starting thread to it. The other CPUs stay free for them and for the rest
of the machine.
"""

from __future__ import annotations

import logging
import os

from django.conf import settings

from infra import cpu_affinity

logger = logging.getLogger(__name__)


def current_cpu() -> int | None:
    """The CPU this process last ran on (``/proc/self/stat``, field 39), None when unknown."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        return int(stat.rsplit(b")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def choose(setting: str, *, backend: str, allowed: set[int], running_on: int | None) -> int | None:
    """The CPU to pin to, None for none (the rules in the module doc). ``ValueError`` for a
    setting that is not ``auto``, ``off`` or one of ``allowed``."""
    value = setting.strip().lower()
    if value == "off":
        return None
    if value == "auto":
        if backend != "inline" or len(allowed) < 2:
            return None
        return running_on if running_on in allowed else min(allowed)
    try:
        cpu = int(value)
    except ValueError:
        raise ValueError(f"NETA_WEB_CPU must be auto, off or a CPU number, not {setting!r}") from None
    if cpu not in allowed:
        raise ValueError(f"NETA_WEB_CPU={cpu}: this process may use CPUs {sorted(allowed)} only")
    return cpu


def pin() -> int | None:
    """Pin every thread of this process to the configured CPU; returns it (None: not pinned)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    cpu = choose(settings.NETA_WEB_CPU, backend=settings.NETA_TASK_BACKEND, allowed=allowed, running_on=current_cpu())
    if cpu is None:
        return None
    cpu_affinity.remember_wide(allowed)
    for tid in _threads():
        try:
            os.sched_setaffinity(tid, {cpu})
        except (ProcessLookupError, PermissionError):  # a thread that just ended
            pass
    logger.info("web process pinned to CPU %d (NETA_WEB_CPU)", cpu)
    return cpu


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
