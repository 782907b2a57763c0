"""Which process owns a run: its host, pid and the process's start time.

A run records the process that owns it (the submitting process while an inline run waits
for a thread, the executing one once claimed, a Celery worker's child from the moment it
takes the task). The reaper (``runtime/runs/reaper.py``), the subagent services and the
deployment checks use it to tell a run whose process is gone from one whose process is
only slow. This module sits below every other module of ``runs/``.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache
from pathlib import Path

HOST = socket.gethostname()


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat`` field 22), or None
    where there is no ``/proc`` or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name (field 2) may hold spaces
    return int(fields[19])


@lru_cache(maxsize=1)
def _own_identity(pid: int) -> dict:
    return {"host": HOST, "pid": pid, "process_started": process_start_time(pid)}


def this_process() -> dict:
    """The identity recorded on runs this process owns (recomputed after a fork)."""
    return _own_identity(os.getpid())


def nobody() -> dict:
    """The identity of a run no process owns yet (handed to Celery, not taken by a worker)."""
    return {"host": "", "pid": None, "process_started": None}


def process_gone(host: str, pid: int | None, started: int | None) -> bool:
    """True only when certain: ``pid`` on ``host`` (this host) no longer runs, or runs as a
    different process (another start time: the pid was reused). Other hosts: False."""
    if not host or host != HOST or not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    tail = stat.rsplit(")", 1)[1].split()
    if tail[0] in ("Z", "X"):  # a zombie or dead process runs nothing
        return True
    return started is not None and int(tail[19]) != started
