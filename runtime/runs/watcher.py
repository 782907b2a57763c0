"""One watcher per process for the runs it executes: their cancel flags and heartbeats.

A run that executes here registers with :func:`watch` (``RunControl`` in the turn loop
does) and is released when it ends. One daemon thread polls every active run of the
process together: each poll is one query (``pk__in`` the watched runs, ``cancel_requested``)
that sets the ``threading.Event`` of every run whose flag is up; once a second one UPDATE
writes the heartbeat of every watched run that is still ``running``. A thread per run did
the same with a query each (50 sessions: 200 flag reads and 50 heartbeat writes a second,
each write taking SQLite's writer lock, and one database connection per run).

The thread keeps its database connection from one busy spell to the next
(``infra.db_threads``; checked when it wakes): closing it whenever no run was left cost
a new connection per turn in a Celery pool process, which runs one turn at a time. A
process that has never run a turn has no watcher and no connection. A failed poll is
logged and tried again at the next one: the watcher never ends a run. After a fork
(Celery's prefork pool) the child starts a watcher of its own on its first run.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from django.db import close_old_connections, connection
from django.utils import timezone

from infra.db_threads import keep_connections, release
from runtime.models import AgentRun, RunStatus

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 1.0


class RunWatcher:
    """The process's watcher thread and the runs it watches (run pk → cancel event)."""

    def __init__(
        self,
        *,
        poll_seconds: float = POLL_SECONDS,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        thread: bool = True,
    ):
        self.poll_seconds = poll_seconds
        self.threaded = thread  # False: no thread, the caller polls (the tests)
        self.heartbeat_seconds = heartbeat_seconds
        self._runs: dict[int, threading.Event] = {}
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self.polls = 0  # polls done (the tests and the bench read it)

    def watch(self, run_pk: int, cancel: threading.Event) -> None:
        with self._lock:
            self._runs[run_pk] = cancel
            if self.threaded and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(
                    target=self._loop, name="neta-run-watcher", daemon=True
                )
                self._thread.start()
            self._lock.notify_all()

    def unwatch(self, run_pk: int) -> None:
        with self._lock:
            self._runs.pop(run_pk, None)

    def watching(self) -> list[int]:
        with self._lock:
            return list(self._runs)

    def poll(self, *, beat: bool) -> None:
        """One poll of every watched run: the heartbeat (one UPDATE) when ``beat``, then the
        cancel flags (one SELECT of the runs whose event is not set yet)."""
        with self._lock:
            runs = dict(self._runs)
        if not runs:
            return
        if beat:
            AgentRun.objects.filter(pk__in=list(runs), status=RunStatus.RUNNING).update(
                heartbeat_at=timezone.now()
            )
        waiting = [pk for pk, event in runs.items() if not event.is_set()]
        if waiting:
            for pk in AgentRun.objects.filter(
                pk__in=waiting, cancel_requested=True
            ).values_list("pk", flat=True):
                runs[pk].set()
        self.polls += 1

    def _loop(self) -> None:
        keep_connections()
        last_beat = 0.0
        while True:
            with self._lock:
                if not self._runs:
                    self._lock.wait()
                    close_old_connections()  # a connection that broke while idle is replaced
                    last_beat = 0.0
                    continue
            time.sleep(self.poll_seconds)
            try:
                now = time.monotonic()
                beat = now - last_beat >= self.heartbeat_seconds
                self.poll(beat=beat)
                release()  # a pooled connection goes back between polls (infra/mysql_backend)
                if beat:
                    last_beat = now
            except (
                Exception
            ):  # the watcher never kills a run; the next poll tries again
                logger.exception("the run watcher's poll failed")
                connection.close()


_watcher: RunWatcher | None = None
_watcher_pid: int | None = None
_watcher_lock = threading.Lock()


def run_watcher() -> RunWatcher:
    """This process's watcher (a new one in a forked child: threads do not survive a fork)."""
    global _watcher, _watcher_pid
    with _watcher_lock:
        if _watcher is None or _watcher_pid != os.getpid():
            _watcher, _watcher_pid = RunWatcher(), os.getpid()
        return _watcher


def flag_is_up(run_pk: int) -> bool:
    """Look at ``run_pk``'s cancel flag now (one query), not at the watcher's next poll."""
    return AgentRun.objects.filter(pk=run_pk, cancel_requested=True).exists()
