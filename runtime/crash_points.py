"""TEST-ONLY fault injection: the crash suite kills a process at a named point."""

from __future__ import annotations

import logging
import os
import signal
import time

from django.conf import settings

logger = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    """TEST-ONLY hook: SIGKILL this process when it reaches the point ``NETA_TEST_KILL_AT``
    names (the crash suite, tests/runtime/test_crash_recovery.py). A no-op when unset."""
    if settings.NETA_TEST_KILL_AT and settings.NETA_TEST_KILL_AT == name:
        logger.warning("NETA_TEST_KILL_AT=%s: killing this process (test-only hook)", name)
        os.kill(os.getpid(), signal.SIGKILL)


class InjectedFault(RuntimeError):
    """TEST-ONLY: the error ``fault_point`` raises."""


_deadlocked: set[str] = set()


def fault_point(name: str, **rows) -> None:
    """TEST-ONLY hook for ``NETA_TEST_FAULT_AT`` (a no-op when unset):

    - ``<name>_error``: raise ``InjectedFault`` here (a claim or finish that fails);
    - ``<name>_dberror``: once per process and point, raise the database's
      ``OperationalError`` here (the database out of reach for a moment);
    - ``<name>_deadlock``: once per process and point, provoke a real deadlock on
      MySQL/MariaDB with the caller's transaction, which holds the session row's lock:
      a second connection locks the run row (``rows["run"]``), then asks for the session
      row (``rows["session"]``); the caller's next write of the run row closes the cycle
      and InnoDB rolls the lighter transaction back — the caller's, which has written
      nothing yet (the other one has written the run row several times) — with 1213.
    """
    fault = settings.NETA_TEST_FAULT_AT
    if not fault or not fault.startswith(name + "_"):
        return
    if fault == f"{name}_error":
        logger.warning("NETA_TEST_FAULT_AT=%s: raising (test-only hook)", fault)
        raise InjectedFault(f"injected fault at {name} (NETA_TEST_FAULT_AT)")
    if fault == f"{name}_dberror" and name not in _deadlocked:
        from django.db import OperationalError  # a test-only hook: loaded only when a fault fires

        _deadlocked.add(name)
        logger.warning("NETA_TEST_FAULT_AT=%s: raising OperationalError once (test-only hook)", fault)
        raise OperationalError(f"injected database error at {name} (NETA_TEST_FAULT_AT)")
    if fault == f"{name}_deadlock" and name not in _deadlocked:
        _deadlocked.add(name)
        logger.warning("NETA_TEST_FAULT_AT=%s: provoking a deadlock (test-only hook)", fault)
        _provoke_deadlock(rows["run"], rows["session"])


def _provoke_deadlock(run_pk: int, session_pk: int) -> None:
    import threading  # a test-only hook: loaded only when a fault fires

    from django.db import connections  # a test-only hook: loaded only when a fault fires

    from runtime.models import (
        AgentRun,  # a test-only hook: the models load only when a fault fires
    )
    from sessions_tree.models import AgentSession  # a test-only hook: loaded only when a fault fires

    holding = threading.Event()

    def other() -> None:
        conn = connections.create_connection("default")
        try:
            with conn.cursor() as cursor:
                cursor.execute("SET autocommit = 0")
                for i in range(5):  # weigh more than the caller: InnoDB rolls the lighter one back
                    cursor.execute(f"UPDATE {AgentRun._meta.db_table} SET rounds = rounds + 0, worker = %s WHERE id = %s", [f"fault-{i}", run_pk])
                holding.set()
                cursor.execute(f"SELECT id FROM {AgentSession._meta.db_table} WHERE id = %s FOR UPDATE", [session_pk])
                cursor.execute("ROLLBACK")
        except Exception:
            logger.exception("the deadlock hook's second connection failed")
        finally:
            holding.set()
            conn.close()

    thread = threading.Thread(target=other, name="fault-deadlock", daemon=True)
    thread.start()
    holding.wait(10)
    time.sleep(0.3)  # let it reach its wait for the session row: the caller's next write closes the cycle
