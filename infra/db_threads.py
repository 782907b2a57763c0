"""Threads that keep their database connection from one job to the next.

Django gives every thread its own connection and, with ``CONN_MAX_AGE = 0``
(``NETA_DB_CONN_MAX_AGE``' default), closes it after each request or job. That is
right for threads that come and go, and wasteful for the fixed sets of threads a
Neta process runs its work on: the inline pool (turns), the HTTP request threads
(``infra.http_threads``), the sockets' database thread and a Celery worker's task
thread (``neta.celery``). A new connection costs
~2 ms of CPU with SQLite (Django registers its functions and pragmas on each) and a
round trip plus a login on MariaDB.

A thread started with ``keep_connections`` as its initializer (``executor()`` does
that) keeps its connections without an age limit: Django's ``close_old_connections``
(at each request's start and end, around each ``database_sync_to_async`` call)
still closes one that is broken or was left inside a transaction, and
``CONN_HEALTH_CHECKS`` checks the rest before their first use in a request. The
threads are few and stay, so the connections are bounded by their number.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.signals import connection_created

_local = threading.local()


def keep_connections() -> None:
    """Mark this thread as one that keeps its connections (a thread initializer)."""
    _local.keep = True
    for conn in connections.all(initialized_only=True):
        if not getattr(conn, "pooled", False):
            conn.close_at = None


def keeps_connections() -> bool:
    return getattr(_local, "keep", False)


def release(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Give this thread's pooled connection back before a long wait (a model's stream, a
    tool's command); the next statement takes one from the pool again. Nothing happens
    inside a transaction, or on a backend without a pool (SQLite: the thread keeps its own)."""
    conn = connections[alias]
    if getattr(conn, "pooled", False) and conn.connection is not None and not conn.in_atomic_block:
        conn.close()


def executor(name: str, workers: int = 1) -> ThreadPoolExecutor:
    """A thread pool whose threads keep their connections."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name, initializer=keep_connections)


def _no_age_limit(sender, connection, **kwargs) -> None:
    # Django set ``close_at`` from CONN_MAX_AGE just before it sent this signal. A pooled
    # connection (infra.mysql_backend) is kept by its process's pool, not by the thread:
    # closed at the job's end, it goes back to the pool and the next job takes it again.
    if keeps_connections() and not getattr(connection, "pooled", False):
        connection.close_at = None


connection_created.connect(_no_age_limit, dispatch_uid="infra.db_threads.no_age_limit")
