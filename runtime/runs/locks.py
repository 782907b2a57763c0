"""The session row: found, and locked for the rest of a transaction — the one lock order.

Every decision about a session's runs (is a run active? may this prompt start one? is
there a queued input left, or does the run complete? may the session go?) is taken
under ONE row lock: the session's ``AgentSession`` row, ``SELECT … FOR UPDATE`` by its
primary key. Nothing locks runs or inputs through a secondary index (the status or the
session index): such a locking read takes locks on other sessions' runs and cycles with
their workers' updates (deadlocks, error 1213, under load).

The lock order, the same in every path that holds more than one lock:

1. the session store's write lock (``provider.write_lock``: the file store's flock, the
   mysql store's lock) — only where the path changes the tree (a prompt continuing
   from another entry, a delete), and always before any row lock;
2. the session row, by primary key (``lock_session`` / ``lock_session_key`` /
   ``lock_session_id``);
3. the session's run rows, by primary key (conditional ``UPDATE … WHERE id = … AND
   status IN …``), then its queued inputs (by primary key, or inserted).

Who takes what (``runtime/runs/lifecycle.py`` holds every transition):

- prompt (new run or queued input): [1 when continuing from an entry] → 2 → 3;
- claim (queued → running): 3 only, one conditional UPDATE in autocommit;
- finish (running → completed | failed | aborted), consuming an input: 2 → 3;
- abort (queued → aborted, or the cancel flag of a running run): 2 → 3;
- reap (running → lost, carrying its prompts; queued → submitted again | failed): 2 → 3;
- delete: 1 → 2 → the session's runs and inputs (deleted by key).

The turn loop's single-row writes (heartbeat, usage, rounds, the in-flight entry id)
are one statement each in autocommit: they hold one lock and never wait while holding
another, so they cannot close a cycle. A provider append locks the session row (inside
the store's lock) and writes entries and events, never runs.

What may still deadlock or time out (1213/1205: InnoDB may pick any victim, and MariaDB
takes locks for foreign-key checks of its own) is retried whole by ``retry_on_deadlock``,
a bounded number of times, each retry logged.

On SQLite there are no row locks: every transaction begins ``IMMEDIATE``
(``neta/env.py``) and holds the database's write lock from its first statement, which
already excludes every other writer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction

from sessions_tree.errors import SessionNotFound
from sessions_tree.models import AgentSession
from infra.prepared import P, Prepared
from sessions_tree.providers.base import load_meta_any

logger = logging.getLogger(__name__)

T = TypeVar("T")

# MySQL/MariaDB: ER_LOCK_DEADLOCK (the transaction was rolled back) and
# ER_LOCK_WAIT_TIMEOUT (the statement was; the whole transaction is rolled back here).
LOCK_CONFLICT_CODES = frozenset({1213, 1205})
DEADLOCK_ATTEMPTS = 5


def session_or_none(session_id: str) -> AgentSession | None:
    """The session's row whatever its store (the stores' own prepared read), or None."""
    return load_meta_any(session_id)


def session_or_not_found(session_id: str) -> AgentSession:
    meta = load_meta_any(session_id)
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return meta


def lock_session(meta: AgentSession) -> AgentSession:
    """Lock ``meta``'s row (by primary key) for the rest of the transaction and read it again.

    The lock that serializes a session's prompts, run transitions and deletion (step 2 of
    the order above). A session deleted meanwhile (or deleted and imported again under the
    same id, a new row) raises ``SessionNotFound``.
    """
    locked = _SESSION_LOCKED.first(pk=meta.pk, session=meta.session_id)
    if locked is None:
        raise SessionNotFound(f"no session {meta.session_id!r}")
    return locked


def lock_session_id(session_id: str) -> AgentSession | None:
    """``lock_session`` for a session known by id: its key is read without a lock, then the
    row is locked by that key. None when the session is gone."""
    pk = AgentSession.objects.filter(session_id=session_id).values_list("pk", flat=True).first()
    if pk is None:
        return None
    return _SESSION_LOCKED.first(pk=pk, session=session_id)


_SESSION_KEY_LOCKED = Prepared(
    lambda: AgentSession.objects.select_for_update().filter(pk=P("pk"), session_id=P("session")).values_list("pk", flat=True)[:1]
)
_SESSION_LOCKED = Prepared(lambda: AgentSession.objects.select_for_update().filter(pk=P("pk"), session_id=P("session"))[:1])


def lock_session_key(session_pk: int, session_id: str) -> int | None:
    """``lock_session`` for a caller that holds a copy of the row (its key): one query,
    ``SELECT id … WHERE id = … FOR UPDATE``, returning only the key (None when the session
    is gone, or is another row under the same id now).

    On SQLite no query: there are no row locks, and the transaction's ``IMMEDIATE`` begin
    already holds the database's write lock (the key is returned as it is)."""
    connection = connections[DEFAULT_DB_ALIAS]
    if not connection.features.has_select_for_update:
        if not connection.in_atomic_block:
            raise RuntimeError("lock_session_key outside a transaction locks nothing")
        return session_pk
    return _SESSION_KEY_LOCKED.first(pk=session_pk, session=session_id)


def is_lock_conflict(exc: BaseException) -> bool:
    """A MySQL/MariaDB deadlock (1213) or lock wait timeout (1205)."""
    if not isinstance(exc, OperationalError):
        return False
    args = getattr(exc.__cause__, "args", None) or exc.args
    return bool(args) and args[0] in LOCK_CONFLICT_CODES


def retry_on_deadlock(
    work: Callable[[], T], *, what: str, attempts: int = DEADLOCK_ATTEMPTS, using: str = DEFAULT_DB_ALIAS, atomic: bool = True
) -> T:
    """Run ``work()`` in a transaction of its own; when the database ends it with a deadlock
    or a lock wait timeout, roll back and run it again, whole (at most ``attempts`` times,
    each retry logged with ``what``, after a short random pause). ``on_commit`` callbacks of
    an attempt that rolled back are dropped with it, so events go out once, after the commit
    that stood.

    Inside an outer transaction a retry is impossible (the database rolled the outer one
    back too): ``work`` runs once, in a savepoint, and the error goes to the caller, whose
    own transaction is the one to retry.

    ``atomic=False``: ``work`` is one statement, atomic by itself in autocommit (no
    BEGIN/COMMIT round trips around it); it is retried the same way.
    """
    if connections[using].in_atomic_block:
        with transaction.atomic(using=using):
            return work()
    for attempt in range(1, attempts + 1):
        try:
            if not atomic:
                return work()
            with transaction.atomic(using=using):
                return work()
        except OperationalError as exc:
            if not is_lock_conflict(exc) or attempt == attempts:
                raise
            logger.warning("%s: %s (attempt %d of %d), retrying the transaction", what, exc, attempt, attempts)
            time.sleep(random.uniform(0.005, 0.05) * attempt)
    raise AssertionError("unreachable")  # the loop returns or raises
