"""Bounded lists: cursor pagination everywhere.

* Resource lists (sessions, runs, agents …): DRF's opaque cursors.
* Entries: by sequence (the position in stored order, which never changes:
  entries are only ever appended). ``?cursor=<seq>&limit=N`` returns the
  entries after ``seq``; ``nextCursor`` is the sequence of the last one.
* Events: by revision. ``?sinceRevision=<r>&limit=N`` returns the events after
  ``r``; ``nextCursor`` is the last revision returned.
"""

from __future__ import annotations

from urllib.parse import urlencode

from rest_framework import serializers
from rest_framework.pagination import CursorPagination


class ResourceCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-id"


class SessionCursorPagination(ResourceCursorPagination):
    ordering = ("-updated_at", "-id")


class RunCursorPagination(ResourceCursorPagination):
    ordering = ("-created_at", "-id")


class NameCursorPagination(ResourceCursorPagination):
    ordering = "name"


class SkillCursorPagination(ResourceCursorPagination):
    ordering = ("discovery_order", "id")


class EntriesQuery(serializers.Serializer):
    cursor = serializers.IntegerField(required=False, min_value=0, default=0, help_text="Sequence of the last entry seen (0: from the start).")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class EventsQuery(serializers.Serializer):
    sinceRevision = serializers.IntegerField(min_value=0, help_text="Return the events after this revision.")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)


def next_link(request, **params) -> str:
    query = request.query_params.copy()
    for key, value in params.items():
        query[key] = str(value)
    return request.build_absolute_uri(request.path) + "?" + urlencode(sorted(query.items()))
