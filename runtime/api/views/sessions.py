"""``/api/sessions/…``: listing, reading (snapshot, entries, events, export) and changing a session."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api import serializers as S
from runtime.api.pagination import (
    EntriesQuery,
    EventsQuery,
    SessionCursorPagination,
    next_link,
)
from runtime.api.errors import ApiError
from runtime.api.views.base import (
    ERROR,
    READ_ERRORS,
    SESSION_ID,
    WRITE_ERRORS,
    SessionApi,
    entry_field,
    parse,
    safe_filename,
    session_or_404,
)
from runtime.sessions.access import visible_sessions
from runtime.sessions.selectors import (
    SEARCH_SCAN_SESSIONS,
    current_revision,
    search_sessions,
    session_snapshot,
)
from runtime.sessions.services import (
    session_compact,
    session_create,
    session_delete,
    session_fork,
    session_label,
    session_rename,
    session_set_status,
    session_switch_leaf,
)
from runtime.models import SessionShare
from runtime.sessions.markdown import session_markdown
from runtime.sessions.permissions import session_approvals, session_set_permission_mode
from runtime.sessions.sharing import pin_set, session_feedback, share_create, share_revoke, share_row
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider


@extend_schema_view(
    list=extend_schema(summary="List sessions (yours; staff who may view sessions: all)", parameters=[S.SessionListQuery], responses={200: S.SessionOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="A session's meta", parameters=[SESSION_ID], responses={200: S.SessionOut, **READ_ERRORS}),
)
class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = S.SessionOut
    pagination_class = SessionCursorPagination
    lookup_field = "session_id"
    lookup_value_regex = r"[^/]+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        qs = visible_sessions(self.request.user).select_related("user")
        if self.action == "list":
            query = parse(S.SessionListQuery, self.request.query_params)
            if "user" in query:
                qs = qs.filter(**{f"user__{get_user_model().USERNAME_FIELD}": query["user"]})
            if "agent" in query:
                qs = qs.filter(agent=query["agent"])
            if "status" in query:
                qs = qs.filter(status=query["status"])
        return qs

    def get_object(self):
        meta = session_or_404(self.request, self.kwargs["session_id"])
        self.check_object_permissions(self.request, meta)
        return meta

    @extend_schema(summary="Create a session", request=S.SessionCreateInput, responses={201: S.SessionOut, **WRITE_ERRORS})
    def create(self, request):
        data = parse(S.SessionCreateInput, request.data)
        meta = session_create(actor=request.user, agent_name=data.get("agent"), title=data.get("title"))
        return Response(S.SessionOut(meta).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Rename and/or archive a session",
        parameters=[SESSION_ID],
        request=S.SessionUpdateInput,
        responses={200: S.SessionOut, **WRITE_ERRORS},
    )
    def partial_update(self, request, session_id=None):
        meta = self.get_object()
        data = parse(S.SessionUpdateInput, request.data)
        if "title" in data:
            session_rename(session_id=meta.session_id, title=data["title"], actor=request.user)
        if "status" in data:
            session_set_status(session_id=meta.session_id, status=data["status"], actor=request.user)
        meta.refresh_from_db()
        return Response(S.SessionOut(meta).data)

    @extend_schema(summary="Delete a session and its entries", parameters=[SESSION_ID], responses={204: None, **WRITE_ERRORS})
    def destroy(self, request, session_id=None):
        meta = self.get_object()
        session_delete(session_id=meta.session_id, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionSearchApi(APIView):
    @extend_schema(
        summary="Find sessions by title and by the text of their messages",
        description=(
            "Case-insensitive; the most recently updated sessions you may read are looked into "
            "(at most `scanned`), at most 50 results, newest first."
        ),
        parameters=[S.SessionSearchQuery],
        responses={200: S.SessionSearchOut, 400: ERROR, 401: ERROR},
    )
    def get(self, request):
        query = parse(S.SessionSearchQuery, request.query_params)
        qs = visible_sessions(request.user).select_related("user")
        if "agent" in query:
            qs = qs.filter(agent=query["agent"])
        if "status" in query:
            qs = qs.filter(status=query["status"])
        hits = search_sessions(qs, query["q"])
        return Response(
            {
                "results": [{**hit, "session": S.SessionOut(hit["session"]).data} for hit in hits],
                "scanned": min(qs.count(), SEARCH_SCAN_SESSIONS),
            }
        )


class SessionSnapshotApi(SessionApi):
    @extend_schema(
        summary="The session at one revision (bounded; `page` says what was left out)",
        description="`runtimeContext` adds the model's `contextWindow` and the `runState` of the active run.",
        responses={200: S.SnapshotOut, **READ_ERRORS},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        return Response(session_snapshot(meta.session_id))


class SessionEntriesApi(SessionApi):
    @extend_schema(
        summary="Entries in stored order, cursor-paginated by sequence",
        parameters=[EntriesQuery],
        responses={200: S.EntryPageOut, **READ_ERRORS, 400: ERROR},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        query = parse(EntriesQuery, request.query_params)
        cursor, limit = query["cursor"], query["limit"]
        entries = get_provider(meta.provider).list_entries(meta.session_id, offset=cursor, limit=limit + 1)
        more = len(entries) > limit
        page = entries[:limit]
        next_cursor = cursor + len(page) if more else None
        return Response(
            {
                "results": page,
                "firstSeq": cursor + 1,
                "nextCursor": next_cursor,
                "next": next_link(request, cursor=next_cursor) if more else None,
            }
        )


class SessionEventsApi(SessionApi):
    @extend_schema(
        summary="Tree events after a revision (the event log, for gap filling)",
        description="410 `resync_needed` when the log no longer reaches back: take a fresh snapshot.",
        parameters=[EventsQuery],
        responses={200: S.EventPageOut, 410: ERROR, **READ_ERRORS, 400: ERROR},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        query = parse(EventsQuery, request.query_params)
        since, limit = query["sinceRevision"], query["limit"]
        events = get_provider(meta.provider).events_since(meta.session_id, since)
        page = events[:limit]
        more = len(events) > limit
        next_cursor = page[-1]["revision"] if more else None
        return Response(
            {
                "results": page,
                "revision": events[-1]["revision"] if events else since,
                "nextCursor": next_cursor,
                "next": next_link(request, sinceRevision=next_cursor) if more else None,
            }
        )


class SessionLeafSwitchApi(SessionApi):
    @extend_schema(
        summary="Move the leaf (Pi's /tree), optionally summarizing the abandoned branch",
        request=S.SwitchLeafInput,
        responses={200: S.SwitchLeafOut, **WRITE_ERRORS, 502: ERROR},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.SwitchLeafInput, request.data)
        with entry_field("entryId"):
            result = session_switch_leaf(
                session_id=meta.session_id,
                entry_id=data["entryId"],
                actor=request.user,
                summarize=data["summarize"],
                instructions=data.get("instructions") or None,
            )
        return Response({**result, "revision": current_revision(meta.session_id)})


class SessionLabelApi(SessionApi):
    @extend_schema(summary="Set or clear an entry's label", request=S.LabelInput, responses={201: S.EntryResultOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.LabelInput, request.data)
        with entry_field("entryId"):
            entry = session_label(session_id=meta.session_id, entry_id=data["entryId"], label=data["label"], actor=request.user)
        return Response({"entry": entry, "revision": current_revision(meta.session_id)}, status=status.HTTP_201_CREATED)


class SessionCompactApi(SessionApi):
    @extend_schema(
        summary="Compact the context now (Pi's /compact)",
        request=S.CompactInput,
        responses={201: S.EntryResultOut, **WRITE_ERRORS, 502: ERROR},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.CompactInput, request.data)
        entry = session_compact(session_id=meta.session_id, actor=request.user, instructions=data.get("instructions") or None)
        return Response({"entry": entry, "revision": current_revision(meta.session_id)}, status=status.HTTP_201_CREATED)


class SessionForkApi(SessionApi):
    @extend_schema(summary="Fork: a new session holding the root→entry path", request=S.ForkInput, responses={201: S.SessionOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.ForkInput, request.data)
        with entry_field("entryId"):
            fork = session_fork(session_id=meta.session_id, entry_id=data["entryId"], actor=request.user)
        fork = AgentSession.objects.select_related("user").get(pk=fork.pk)
        return Response(S.SessionOut(fork).data, status=status.HTTP_201_CREATED)


EXPORT_CHUNK_BYTES = 64 * 1024


def _chunks(lines) -> Iterator[bytes]:
    """``lines`` as UTF-8 chunks of about ``EXPORT_CHUNK_BYTES``."""
    buffer: list[str] = []
    size = 0
    for line in lines:
        buffer.append(line)
        size += len(line)
        if size >= EXPORT_CHUNK_BYTES:
            yield "".join(buffer).encode("utf-8")
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode("utf-8")


async def _async_chunks(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    done = object()
    pull = sync_to_async(lambda: next(chunks, done), thread_sensitive=True)
    while (chunk := await pull()) is not done:
        yield chunk


class SessionExportApi(SessionApi):
    @extend_schema(
        summary="Download the session: a Pi JSONL file, or (as=markdown) its active path as Markdown",
        parameters=[S.ExportQuery],
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="Pi v3 JSONL"), **READ_ERRORS},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        query = parse(S.ExportQuery, request.query_params)
        if query["as"] == "markdown":
            response = HttpResponse(session_markdown(meta), content_type="text/markdown; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{safe_filename(meta.title or meta.session_id)}.md"'
            return response
        chunks = _chunks(get_provider(meta.provider).export_lines(meta.session_id))
        first = next(chunks, b"")  # a session gone meanwhile fails here, as an error answer, not mid-download
        # Streamed: memory stays constant in the session's size. Under ASGI the chunks are
        # pulled through an async iterator (Django would read a sync one whole first).
        body = itertools.chain([first], chunks)
        if "wsgi.version" not in request.META:
            body = _async_chunks(body)
        response = StreamingHttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{safe_filename(meta.session_id)}.jsonl"'
        return response


class SessionFeedbackApi(SessionApi):
    @extend_schema(summary="👍 / 👎 (with an optional note) on an answer: a custom entry the model never reads", request=S.FeedbackInput, responses={201: S.EntryResultOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.FeedbackInput, request.data)
        with entry_field("entryId"):
            entry = session_feedback(session_id=meta.session_id, entry_id=data["entryId"], rating=data["rating"], note=data.get("note") or "", actor=request.user)
        return Response({"entry": entry, "revision": current_revision(meta.session_id)}, status=status.HTTP_201_CREATED)


class SessionPermissionModeApi(SessionApi):
    @extend_schema(summary="The approval mode in force (the agent's, tightened by the session's) and the session's rules", responses={200: OpenApiTypes.OBJECT, **READ_ERRORS})
    def get(self, request, session_id: str):
        meta = self.meta
        return Response(session_approvals(meta))

    @extend_schema(summary="Set the session's own approval mode (it can tighten the agent's, never loosen it)", request=S.PermissionModeInput, responses={201: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def put(self, request, session_id: str):
        meta = self.meta
        data = parse(S.PermissionModeInput, request.data)
        entry = session_set_permission_mode(meta=meta, mode=data["mode"], actor=request.user)
        return Response({"entry": entry, **session_approvals(meta)}, status=status.HTTP_201_CREATED)


class SessionSharesApi(SessionApi):
    @extend_schema(summary="The session's share links", responses={200: OpenApiTypes.OBJECT, **READ_ERRORS})
    def get(self, request, session_id: str):
        meta = self.meta
        return Response({"results": [share_row(s) for s in SessionShare.objects.filter(session=meta)]})

    @extend_schema(summary="A read-only link to the active path as it is now (no login needed to open it)", request=None, responses={201: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.meta
        return Response(share_row(share_create(meta=meta, actor=request.user)), status=status.HTTP_201_CREATED)


class SessionShareApi(SessionApi):
    session_needs = {"DELETE": "write"}  # revoking a link is a write, not the session's deletion

    @extend_schema(summary="Revoke a share link (it stops working at once)", request=None, responses={200: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def delete(self, request, session_id: str, share_id: int):
        meta = self.meta
        share = SessionShare.objects.filter(session=meta, pk=share_id).first()
        if share is None:
            raise ApiError("not_found", _("no share link %(share_id)s of this session") % {"share_id": share_id}, status_code=404)
        return Response(share_row(share_revoke(share)))


class SessionPinApi(SessionApi):
    session_needs = {"PUT": "read", "DELETE": "read"}  # your own list: reading the session is enough

    @extend_schema(summary="Pin the session to the top of your session list", request=None, responses={200: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def put(self, request, session_id: str):
        return Response({"pinned": pin_set(meta=self.meta, user=request.user, pinned=True)})

    @extend_schema(summary="Unpin the session", request=None, responses={200: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def delete(self, request, session_id: str):
        return Response({"pinned": pin_set(meta=self.meta, user=request.user, pinned=False)})
