"""Django's MySQL/MariaDB backend, its connections lent from a bounded pool per process.

Django gives every thread a connection of its own, opened on first use and kept until
the thread closes it. A process that runs many turns on many threads (a Celery worker on
a threads pool, the inline pool) would so hold one connection per thread, most of them
idle while their turn waits on its model, and a few such processes exhaust the server's
``max_connections``. Here a connection that is closed goes back to this process's pool
instead (when it is healthy and outside a transaction), and the next thread that needs
one takes it from there: open connections follow the threads that are *using* the
database, not the threads that exist.

- At most ``NETA_DB_POOL_SIZE`` connections per process and database are open at once
  (lent out or idle). A thread that needs one when all are lent out waits for one to come
  back, at most ``NETA_DB_POOL_WAIT_SECONDS``; then Django's ``OperationalError``.
- A connection that was idle in the pool longer than ``PING_AFTER_SECONDS`` is pinged
  before it is lent again (a broken one is closed and another taken); a fresh one, or one
  just given back, is lent as it is: no statement of its own.
- Given back: the connection's session state is what Django's ``connect`` set (autocommit,
  the isolation level, the sql mode); a connection left inside a transaction, or whose
  last statement failed, is closed for real instead.
- After a fork (Celery's prefork children) a child starts a pool of its own: connections
  never cross processes.

``infra.db_threads.release()`` is what a long wait calls first (the turn, before it
streams from its model and runs a tool): the thread's connection goes back to the pool
unless the thread is inside a transaction. A no-op on other backends (SQLite keeps its
per-thread connection).
"""

from __future__ import annotations

import os
import threading
import time

from django.conf import settings
from django.db import OperationalError
from django.db.backends.mysql import base

PING_AFTER_SECONDS = 5.0


class Pool:
    """The connections of one database in one process: idle ones, and how many are open."""

    def __init__(self, size: int, wait: float):
        self.size, self.wait = size, wait
        self.pid = os.getpid()
        self.idle: list[tuple[object, float]] = []  # (raw connection, when it came back), newest last
        self.open = 0  # lent out + idle
        self.lent_peak = 0
        self._cond = threading.Condition()

    def take(self, connect) -> tuple[object, bool]:
        """A raw connection: an idle one (``True``: it was set up already), or a new one
        from ``connect()`` while fewer than ``size`` are open; else wait for one."""
        deadline = time.monotonic() + self.wait
        with self._cond:
            while True:
                while self.idle:
                    raw, since = self.idle.pop()
                    if time.monotonic() - since < PING_AFTER_SECONDS or _alive(raw):
                        self._lent()
                        return raw, True
                    self.open -= 1
                    _close_quietly(raw)
                if self.open < self.size:
                    self.open += 1
                    self._lent()
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OperationalError(
                        f"no database connection free in this process within {self.wait:g} s "
                        f"(NETA_DB_POOL_SIZE={self.size} are in use)"
                    )
                self._cond.wait(left)
        try:
            return connect(), False
        except BaseException:
            self._gone()
            raise

    def give(self, raw) -> None:
        with self._cond:
            self.idle.append((raw, time.monotonic()))
            self._cond.notify()

    def discard(self, raw) -> None:
        _close_quietly(raw)
        self._gone()

    def _gone(self) -> None:
        with self._cond:
            self.open -= 1
            self._cond.notify()

    def _lent(self) -> None:
        self.lent_peak = max(self.lent_peak, self.open - len(self.idle))

    def stats(self) -> dict:
        with self._cond:
            return {"open": self.open, "idle": len(self.idle), "lentPeak": self.lent_peak, "size": self.size}


def _alive(raw) -> bool:
    try:
        raw.ping()
        return True
    except Exception:  # noqa: BLE001 - any failure: the connection is not lent
        return False


def _close_quietly(raw) -> None:
    try:
        raw.close()
    except Exception:  # noqa: BLE001 - already broken
        pass


_pools: dict[tuple, Pool] = {}
_pools_lock = threading.Lock()


def pool_for(settings_dict: dict) -> Pool:
    """This process's pool for the database ``settings_dict`` names (a new one after a fork;
    another when the name changes, as the test runner's switch to its test database does)."""
    key = tuple(settings_dict.get(k) for k in ("HOST", "PORT", "USER", "NAME"))
    pool = _pools.get(key)
    if pool is not None and pool.pid == os.getpid():
        return pool
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool.pid != os.getpid():
            pool = _pools[key] = Pool(settings.NETA_DB_POOL_SIZE, settings.NETA_DB_POOL_WAIT_SECONDS)
        return pool


class DatabaseWrapper(base.DatabaseWrapper):
    pooled = True

    def get_new_connection(self, conn_params):
        self._pool = pool_for(self.settings_dict)
        raw, self._set_up = self._pool.take(lambda: super(DatabaseWrapper, self).get_new_connection(conn_params))
        return raw

    def init_connection_state(self):
        if not getattr(self, "_set_up", False):
            super().init_connection_state()

    def _start_transaction_under_autocommit(self):
        """An atomic block's transaction is a ``BEGIN`` while the session stays in autocommit:
        one round trip, where Django's default turns autocommit off before the block and on
        again after its commit (two). Sent on the raw connection, as those switches are, so
        Django's query log does not count it."""
        with self.wrap_database_errors:
            self.connection.query(b"BEGIN")

    def _set_autocommit(self, autocommit):
        # Lent connections are in autocommit already: no statement to say so again.
        if getattr(self, "_set_up", False) and self.connection.get_autocommit() == autocommit:
            return
        super()._set_autocommit(autocommit)

    def _close(self):
        raw = self.connection
        if raw is None:
            return
        pool = getattr(self, "_pool", None)
        if pool is None or pool.pid != os.getpid():  # a connection inherited over a fork: not ours to lend
            _close_quietly(raw)
            return
        # Outside any transaction: no atomic block open (its transaction is a BEGIN in
        # autocommit), and autocommit not left switched off.
        reusable = not self.in_atomic_block and not self.errors_occurred
        if reusable:
            try:
                reusable = raw.get_autocommit()
            except Exception:  # noqa: BLE001 - a broken connection is not lent again
                reusable = False
        if reusable:
            pool.give(raw)
        else:
            pool.discard(raw)

