"""Input errors of the runtime's services, and the checks several of them share."""

from __future__ import annotations
from django.utils.translation import gettext as _


class RuntimeInputError(ValueError):
    """Bad input to a runtime service; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def non_empty(field: str, value, max_chars: int) -> str:
    """``value`` if it is a string with something in it and at most ``max_chars`` long."""
    if not isinstance(value, str) or not value.strip():
        raise RuntimeInputError(field, _("must be a non-empty string"))
    if len(value) > max_chars:
        raise RuntimeInputError(field, _("is longer than %(max_chars)s characters") % {"max_chars": max_chars})
    return value
