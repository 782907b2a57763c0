"""Django's SQLite backend, with the threads of one process that write queued on a lock.

SQLite has one writer at a time (WAL lets readers go on beside it). Transactions start
with ``BEGIN IMMEDIATE`` (``transaction_mode``), so a writer asks for the lock up front;
one that finds it taken waits in SQLite's busy handler, which *sleeps* between tries
(1, 2, 5, 10 … up to 100 ms): under load a waiter sleeps on long after the lock was
released, and the threads of the inline pool (50 sessions of turns) spent more of
their time waiting on the writer lock than holding it. Here the threads of this process
first queue on a ``threading.Lock`` per database file, released the moment the
transaction commits or rolls back, so the next writer starts at once; SQLite's busy
timeout still arbitrates between processes. A thread that already waited as long as
the busy timeout for the queue (say it holds a transaction on a second connection
itself) goes on to SQLite, which decides as before.

Writes outside a transaction (a single UPDATE in autocommit) take SQLite's lock for
that statement only and are not queued here.

Its cursors also remember how each statement's ``%s`` placeholders became SQLite's
``?`` (Django's ``convert_query`` runs a regular expression over the statement on
every execute: ~4 % of a turn's CPU, for statements that repeat word for word).
"""

from __future__ import annotations

import threading

from django.db.backends.sqlite3 import base

_queues: dict[str, threading.Lock] = {}
_queues_lock = threading.Lock()


def _queue(name: str) -> threading.Lock:
    with _queues_lock:
        return _queues.setdefault(name, threading.Lock())


# Statement -> the same in SQLite's "qmark" style; emptied when full (statements whose
# text varies, as IN lists of every length, cannot grow it without bound).
_converted: dict[str, str] = {}
_CONVERTED_MAX = 2048


class _Cursor(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is not None:
            return super().convert_query(query, param_names=param_names)
        converted = _converted.get(query)
        if converted is None:
            converted = super().convert_query(query)
            if len(_converted) >= _CONVERTED_MAX:
                _converted.clear()
            _converted[query] = converted
        return converted


class DatabaseWrapper(base.DatabaseWrapper):
    _queued: threading.Lock | None = None

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=_Cursor)

    def _start_transaction_under_autocommit(self):
        queue = _queue(str(self.settings_dict["NAME"]))
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        if queue.acquire(timeout=timeout):
            self._queued = queue
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._leave_queue()
            raise

    def _leave_queue(self) -> None:
        queue, self._queued = self._queued, None
        if queue is not None:
            queue.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._leave_queue()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._leave_queue()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._leave_queue()
