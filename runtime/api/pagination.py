"""Bounded lists: cursor pagination everywhere.

* Resource lists (sessions, runs, agents …): DRF's opaque cursors. A cursor
  the server did not make (undecodable, or a position of the wrong type for
  the list's ordering: ``p=2025`` where a date belongs) answers 400
  ``invalid_cursor`` with the field ``cursor``; it never reaches the database.
* Entries: by sequence (the position in stored order, which never changes:
  entries are only ever appended). ``?cursor=<seq>&limit=N`` returns the
  entries after ``seq``; ``nextCursor`` is the sequence of the last one.
* Events: by revision. ``?sinceRevision=<r>&limit=N`` returns the events after
  ``r``; ``nextCursor`` is the last revision returned.
"""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import urlencode

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination

from runtime.api.errors import ApiError

# Sequences and revisions are counters: far below this, which JavaScript's
# numbers and every database's integers hold exactly.
MAX_POSITION = 2**53 - 1


def invalid_cursor(detail: str) -> ApiError:
    return ApiError("invalid_cursor", _("invalid cursor: %(detail)s (use the `next`/`previous` links as given)") % {"detail": detail}, field="cursor")


class ResourceCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-id"

    def paginate_queryset(self, queryset, request, view=None):
        self.model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise invalid_cursor("not a cursor this server made") from None
        except UnicodeError:
            raise invalid_cursor("not base64 of ASCII text") from None
        if cursor is None or cursor.position is None:
            return cursor
        return Cursor(offset=cursor.offset, reverse=cursor.reverse, position=self._checked_position(cursor.position))

    def _checked_position(self, position: str) -> str:
        """The position, if the list's first ordering field can hold it; else 400."""
        name = self.ordering[0].lstrip("-")
        try:
            field = self.model._meta.get_field(name)
        except FieldDoesNotExist:  # pragma: no cover - orderings name real fields
            return position
        if "\x00" in position:
            raise invalid_cursor("the position holds a NUL character")
        try:
            value = field.to_python(position)
            field.run_validators(value)  # integer ranges of the database, text lengths
            if isinstance(value, datetime) and value.tzinfo is not None:
                value.astimezone(timezone.utc)  # far years overflow when converted
        except (ValidationError, ValueError, TypeError, OverflowError):
            raise invalid_cursor(f"the position is not a valid {field.name}") from None
        return position


class SessionCursorPagination(ResourceCursorPagination):
    ordering = ("-updated_at", "-id")


class RunCursorPagination(ResourceCursorPagination):
    ordering = ("-created_at", "-id")


class NameCursorPagination(ResourceCursorPagination):
    ordering = "name"


class SkillCursorPagination(ResourceCursorPagination):
    ordering = ("discovery_order", "id")


class EntriesQuery(serializers.Serializer):
    cursor = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_POSITION, default=0, help_text="Sequence of the last entry seen (0: from the start)."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class EventsQuery(serializers.Serializer):
    sinceRevision = serializers.IntegerField(min_value=0, max_value=MAX_POSITION, help_text="Return the events after this revision.")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)


def next_link(request, **params) -> str:
    query = request.query_params.copy()
    for key, value in params.items():
        query[key] = str(value)
    return request.build_absolute_uri(request.path) + "?" + urlencode(sorted(query.items()))
