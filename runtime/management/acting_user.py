"""``--as-user USERNAME`` for the runtime's commands: who the writes they make are recorded as.

Without it a command acts as nobody (``SessionEvent.actor`` stays null: the command line).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError


def add_as_user_argument(parser) -> None:
    parser.add_argument("--as-user", help="record this username as the one acting (default: no user, the command line)")


def acting_user(username: str | None):
    """The active user named ``username``, or None without one; ``CommandError`` if there is no such user."""
    if not username:
        return None
    model = get_user_model()
    try:
        user = model.objects.get_by_natural_key(username)
    except model.DoesNotExist:
        raise CommandError(f"no user {username!r}") from None
    if not user.is_active:
        raise CommandError(f"user {username!r} is inactive")
    return user
