"""TEST-ONLY fault injection: the crash suite kills a process at a named point."""

from __future__ import annotations

import logging
import os
import signal

from django.conf import settings

logger = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    """TEST-ONLY hook: SIGKILL this process when it reaches the point ``NETA_TEST_KILL_AT``
    names (the crash suite, tests/runtime/test_crash_recovery.py). A no-op when unset."""
    if settings.NETA_TEST_KILL_AT and settings.NETA_TEST_KILL_AT == name:
        logger.warning("NETA_TEST_KILL_AT=%s: killing this process (test-only hook)", name)
        os.kill(os.getpid(), signal.SIGKILL)
