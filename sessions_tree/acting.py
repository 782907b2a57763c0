"""Who a write is done by: the acting user the kernel records with each tree event.

The runtime's services say who acts (``with acting_as(actor): provider.append_…``); every
event the providers record meanwhile, in this thread or task, carries that user in
``SessionEvent.actor`` (null: no user — the command line, the reaper, a system repair).
The kernel never decides who acts; it only writes down what it is told, so a staff
member's rename of another user's session is recorded as the staff member's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from django.db import transaction

_actor_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("sessions_tree_actor_id", default=None)


def _pk(user) -> int | None:
    if user is None:
        return None
    pk = getattr(user, "pk", None)
    if pk is None and getattr(user, "is_authenticated", True) is False:
        return None  # AnonymousUser: nobody to record
    if not isinstance(pk, int) or isinstance(pk, bool):
        raise TypeError(f"acting_as needs a saved user or None, not {user!r}")
    return pk


@contextlib.contextmanager
def acting_as(user=None, *, user_id: int | None = None) -> Iterator[None]:
    """Record ``user`` (or the user with primary key ``user_id``) as the actor of the
    events written inside the block; nests, and restores the outer actor on exit."""
    token = _actor_id.set(user_id if user is None else _pk(user))
    try:
        yield
    finally:
        _actor_id.reset(token)


def current_actor_id() -> int | None:
    """The primary key of the user acting now, or None."""
    return _actor_id.get()


# ---------------------------------------------------------------- writes that ride along

_pending: contextvars.ContextVar[list | None] = contextvars.ContextVar("sessions_tree_also_in_change", default=None)


@contextlib.contextmanager
def also_in_change(callback) -> Iterator[None]:
    """Run ``callback()`` inside the transaction of the next tree change made in the block
    (the runtime's audit row commits with the rename it records, or not at all). If the
    block made no change (a service that writes rows only), it runs after the block, in a
    transaction of its own; if the block raised, it does not run."""
    box = [callback]
    token = _pending.set(box)
    try:
        yield
    finally:
        _pending.reset(token)
    if box:
        with transaction.atomic():
            box.pop()()


def run_also_in_change() -> None:
    """Called by the providers inside a change's transaction: runs the pending callback, once."""
    box = _pending.get()
    if box:
        box.pop()()
