"""Helpers of the tool catalog's tests: the canary secret tools must never reach, finding
processes by command line, cancelling after a while."""

from __future__ import annotations

import os
import threading

SECRET = "TOP-SECRET-CANARY-7f3a"


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (to find survivors)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry))
    return found


def cancel_after(event: threading.Event, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, event.set)
    timer.start()
    return timer
