"""The catalog's version, and what a process keeps of the catalog at that version.

The tool governance rows (``ToolConfig``) and the skill rows (``SkillResource``) change
rarely and are read by every run (the projection, the system prompt's skill index).
Each change bumps ``CatalogVersion.version`` in its own transaction (model signals for
saves and deletes, ``bump()`` for bulk updates), so "the catalog at version N" means the
same rows in every process. A reader that knows the current number (``at_version(n)``:
the run's claim reads it with the run) takes what this process cached at ``n`` and
reads nothing; a different number, or no number at all, reads the rows as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import BigIntegerField, F, Subquery, Value
from django.db.models.functions import Coalesce

from toolcatalog.models import CatalogVersion

T = TypeVar("T")

ROW = 1
_known: contextvars.ContextVar[int | None] = contextvars.ContextVar("catalog_version", default=None)
_lock = threading.Lock()
_cache: dict[str, tuple[int, object]] = {}


@functools.cache
def current_version():
    """The version as an expression (annotate it onto a query the caller makes anyway);
    0 while the row does not exist (no change recorded since the table was created).
    Built once: a query resolves a copy of it."""
    return Coalesce(Subquery(CatalogVersion.objects.filter(pk=ROW).values("version")[:1]), Value(0), output_field=BigIntegerField())


def bump() -> None:
    """One more version: call it in the transaction that changes catalog rows.

    The row starts at a random number, so a table emptied and filled again (a test
    database flushed between tests) never repeats a number some process kept."""
    if CatalogVersion.objects.filter(pk=ROW).update(version=F("version") + 1):
        return
    try:
        with transaction.atomic():
            CatalogVersion.objects.create(pk=ROW, version=secrets.randbits(62) + 1)
    except IntegrityError:  # created meanwhile by another writer
        CatalogVersion.objects.filter(pk=ROW).update(version=F("version") + 1)


@contextlib.contextmanager
def at_version(version: int | None) -> Iterator[None]:
    """Within: the catalog is known to be at ``version`` (None: unknown, read the rows)."""
    token = _known.set(version if version is not None else None)
    try:
        yield
    finally:
        _known.reset(token)


def cached(key: str, build: Callable[[], T]) -> T:
    """``build()``'s value for ``key`` at the known version, built once per version per
    process; without a known version ``build()`` runs every time (and nothing is kept).
    The value is shared between threads: callers treat it as read-only."""
    version = _known.get()
    if version is None or connection.in_atomic_block:
        # Unknown, or read inside a transaction that may still change the rows (and roll
        # back): only committed rows are kept.
        return build()
    with _lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == version:
        return hit[1]  # type: ignore[return-value]
    value = build()
    with _lock:
        _cache[key] = (version, value)
    return value


def forget() -> None:
    """Drop what this process keeps (tests)."""
    with _lock:
        _cache.clear()
