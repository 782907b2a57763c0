"""API views: viewsets for plain resources, one ``APIView`` per session command.

Views parse input with a serializer, call one service, and re-read what they
return. They hold no business logic; errors become the one error shape in
``runtime.api.errors``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.views.decorators.csrf import ensure_csrf_cookie
from django.utils.decorators import method_decorator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view, inline_serializer
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime import selectors
from runtime.api import serializers as S
from runtime.api.errors import ApiError, FieldError
from runtime.api.pagination import (
    EntriesQuery,
    EventsQuery,
    NameCursorPagination,
    RunCursorPagination,
    SessionCursorPagination,
    SkillCursorPagination,
    next_link,
)
from runtime.models import Agent, AgentRun, ApiToken, ModelConfig
from runtime.selectors import session_snapshot
from runtime.services import run_abort, session_compact, session_prompt, session_switch_leaf
from runtime.services import (
    session_create,
    session_delete,
    session_fork,
    session_import,
    session_label,
    session_rename,
    session_set_status,
)
from sessions_tree.errors import EntryNotFound, InvalidSessionFile
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider
from skills_registry.models import SkillResource

ERROR = inline_serializer(
    "Error",
    fields={
        "error": inline_serializer(
            "ErrorBody",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False),
            },
        )
    },
)
READ_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}
WRITE_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR}
SESSION_ID = OpenApiParameter("session_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="Session id")


def visible_sessions(user):
    """Sessions ``user`` may read (``runtime.selectors.visible_sessions``: the one rule)."""
    return selectors.visible_sessions(user)


def required_access(request) -> str:
    """What a request needs of its session: reads read, DELETE deletes, every other write writes."""
    if request.method in permissions.SAFE_METHODS:
        return "read"
    return "delete" if request.method == "DELETE" else "write"


def session_or_404(request, session_id: str, need: str | None = None) -> AgentSession:
    """The session, if the caller may do ``need`` (default: what the method needs) with it.

    A session the caller may not read answers 404 exactly like a missing one; one
    they may read but not write (or delete) answers 403.
    """
    meta = AgentSession.objects.filter(session_id=session_id).first()
    token = request.auth if isinstance(request.auth, ApiToken) else None
    access = selectors.session_access(request.user, meta, token=token)
    if not access.read:
        raise ApiError("session_not_found", f"no session {session_id!r}", status_code=404)
    need = need or required_access(request)
    if not access.allows(need):
        verb = "delete" if need == "delete" else "change"
        raise ApiError("permission_denied", f"you may read this session but not {verb} it", status_code=403)
    return meta


def parse(serializer_cls, data) -> dict:
    serializer = serializer_cls(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@contextlib.contextmanager
def entry_field(name: str):
    """Report a missing entry as an error about input field ``name``."""
    try:
        yield
    except EntryNotFound as exc:
        raise FieldError(name, exc) from exc


def current_revision(session_id: str) -> int:
    return AgentSession.objects.filter(session_id=session_id).values_list("revision", flat=True).first() or 0


# --------------------------------------------------------------------------- sessions


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
        meta = session_create(user=request.user, agent_name=data.get("agent"), title=data.get("title"))
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
            session_rename(session_id=meta.session_id, title=data["title"])
        if "status" in data:
            session_set_status(session_id=meta.session_id, status=data["status"])
        meta.refresh_from_db()
        return Response(S.SessionOut(meta).data)

    @extend_schema(summary="Delete a session and its entries", parameters=[SESSION_ID], responses={204: None, **WRITE_ERRORS})
    def destroy(self, request, session_id=None):
        meta = self.get_object()
        session_delete(session_id=meta.session_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionApi(APIView):
    """Base for per-session endpoints: the session must be visible to the caller."""

    def session(self, request, session_id: str) -> AgentSession:
        return session_or_404(request, session_id)


class SessionSnapshotApi(SessionApi):
    @extend_schema(
        summary="The session at one revision (bounded; `page` says what was left out)",
        description="`runtimeContext` adds the model's `contextWindow` and the `runState` of the active run.",
        responses={200: S.SnapshotOut, **READ_ERRORS},
    )
    def get(self, request, session_id: str):
        meta = self.session(request, session_id)
        return Response(session_snapshot(meta.session_id))


class SessionEntriesApi(SessionApi):
    @extend_schema(
        summary="Entries in stored order, cursor-paginated by sequence",
        parameters=[EntriesQuery],
        responses={200: S.EntryPageOut, **READ_ERRORS, 400: ERROR},
    )
    def get(self, request, session_id: str):
        meta = self.session(request, session_id)
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
        meta = self.session(request, session_id)
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


class SessionPromptApi(SessionApi):
    @extend_schema(
        summary="Send a prompt (starts a run, or is queued on the active one)",
        request=S.PromptInput,
        responses={202: S.PromptOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = parse(S.PromptInput, request.data)
        with entry_field("fromEntryId"):
            outcome = session_prompt(
                session_id=meta.session_id,
                text=data["text"],
                user=request.user,
                images=[dict(i) for i in data.get("images") or []],
                from_entry_id=data.get("fromEntryId") or None,
                mode=data["mode"],
                model_name=data.get("model") or None,
            )
        # The run as committed: re-reading it could find it gone (finished, then deleted with its session).
        run = outcome.run
        body = {"run": S.RunOut(run).data, "queuedAs": outcome.queued_as, "editorText": outcome.editor_text}
        return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionAbortApi(SessionApi):
    @extend_schema(summary="Abort the active run (cooperative)", request=None, responses={200: S.AbortOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        run = run_abort(session_id=meta.session_id)
        if run is not None:
            run = AgentRun.objects.select_related("agent").get(pk=run.pk)
        return Response({"run": S.RunOut(run).data if run is not None else None})


class SessionLeafSwitchApi(SessionApi):
    @extend_schema(
        summary="Move the leaf (Pi's /tree), optionally summarizing the abandoned branch",
        request=S.SwitchLeafInput,
        responses={200: S.SwitchLeafOut, **WRITE_ERRORS, 502: ERROR},
    )
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = parse(S.SwitchLeafInput, request.data)
        with entry_field("entryId"):
            result = session_switch_leaf(
                session_id=meta.session_id,
                entry_id=data["entryId"],
                summarize=data["summarize"],
                instructions=data.get("instructions") or None,
            )
        return Response({**result, "revision": current_revision(meta.session_id)})


class SessionLabelApi(SessionApi):
    @extend_schema(summary="Set or clear an entry's label", request=S.LabelInput, responses={201: S.EntryResultOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = parse(S.LabelInput, request.data)
        with entry_field("entryId"):
            entry = session_label(session_id=meta.session_id, entry_id=data["entryId"], label=data["label"])
        return Response({"entry": entry, "revision": current_revision(meta.session_id)}, status=status.HTTP_201_CREATED)


class SessionCompactApi(SessionApi):
    @extend_schema(
        summary="Compact the context now (Pi's /compact)",
        request=S.CompactInput,
        responses={201: S.EntryResultOut, **WRITE_ERRORS, 502: ERROR},
    )
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = parse(S.CompactInput, request.data)
        entry = session_compact(session_id=meta.session_id, instructions=data.get("instructions") or None)
        return Response({"entry": entry, "revision": current_revision(meta.session_id)}, status=status.HTTP_201_CREATED)


class SessionForkApi(SessionApi):
    @extend_schema(summary="Fork: a new session holding the root→entry path", request=S.ForkInput, responses={201: S.SessionOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = parse(S.ForkInput, request.data)
        with entry_field("entryId"):
            fork = session_fork(session_id=meta.session_id, entry_id=data["entryId"], user=request.user)
        fork = AgentSession.objects.select_related("user").get(pk=fork.pk)
        return Response(S.SessionOut(fork).data, status=status.HTTP_201_CREATED)


class SessionExportApi(SessionApi):
    @extend_schema(
        summary="Download the session as a Pi JSONL file",
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="Pi v3 JSONL"), **READ_ERRORS},
    )
    def get(self, request, session_id: str):
        meta = self.session(request, session_id)
        data = "".join(get_provider(meta.provider).export_lines(meta.session_id)).encode("utf-8")
        response = HttpResponse(data, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_safe_name(meta.session_id)}.jsonl"'
        return response


def _safe_name(value: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in value)[:80] or "session"


class _ImportTooLarge(RequestDataTooBig):
    pass


class _ImportLimitHandler(FileUploadHandler):
    """Counts the upload as it arrives and stops reading past ``NETA_IMPORT_MAX_BYTES`` (413)."""

    def __init__(self, request=None, limit: int = 0):
        super().__init__(request)
        self.limit, self.seen = limit, 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + 64 * 1024:  # the form's own bytes aside
            raise _ImportTooLarge(f"the upload is larger than {self.limit} bytes")
        return None

    def receive_data_chunk(self, raw_data, start):
        self.seen += len(raw_data)
        if self.seen > self.limit:
            raise _ImportTooLarge(f"the file is larger than {self.limit} bytes")
        return raw_data

    def file_complete(self, file_size):
        return None


class SessionImportApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body (authentication's CSRF check may): stop
        # reading as soon as the upload is larger than the limit.
        request.upload_handlers.insert(0, _ImportLimitHandler(request, settings.NETA_IMPORT_MAX_BYTES))
        return super().initialize_request(request, *args, **kwargs)

    @extend_schema(
        summary="Import a Pi session file (multipart upload)",
        description=(
            "A header id that is already stored is replaced by a fresh one (`import.idChanged`); "
            "`import` lists the lines skipped or repaired. A header field that is unsafe (id, timestamp, "
            "cwd, parentSession) or an entry the store cannot hold refuses the file (400, `invalid_session_file`)."
        ),
        request={"multipart/form-data": S.ImportInput},
        responses={201: S.ImportOut, **WRITE_ERRORS, 413: ERROR},
    )
    def post(self, request):
        limit = settings.NETA_IMPORT_MAX_BYTES
        try:
            data = parse(S.ImportInput, request.data)
        except _ImportTooLarge as exc:
            raise ApiError("too_large", str(exc), status_code=413, field="file") from None
        upload = data["file"]
        if upload.size > limit:
            raise ApiError("too_large", f"the file is larger than {limit} bytes", status_code=413, field="file")
        name = upload.name or "file"
        with _upload_on_disk(upload) as path:
            try:
                meta = session_import(
                    path=path,
                    user=request.user,
                    agent_name=data.get("agent"),
                    provider_kind=data.get("provider"),
                    source_name=name,
                )
            except InvalidSessionFile as exc:
                # The message names our temporary file; the client knows its upload as "file".
                field = f"file.{exc.field}" if exc.field else "file"
                raise ApiError(exc.code, str(exc).replace(str(path), name), field=field) from exc
        meta = AgentSession.objects.select_related("user").get(pk=meta.pk)
        return Response(S.ImportOut(meta).data, status=status.HTTP_201_CREATED)


@contextlib.contextmanager
def _upload_on_disk(upload):
    temp_path = getattr(upload, "temporary_file_path", None)
    if temp_path is not None:
        yield Path(temp_path())
        return
    fd, name = tempfile.mkstemp(suffix=".jsonl", prefix="neta-import-")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in upload.chunks():
                fh.write(chunk)
        yield Path(name)
    finally:
        os.unlink(name)


# --------------------------------------------------------------------------- agents, models, tools, skills, runs


@extend_schema_view(
    list=extend_schema(summary="Agents", responses={200: S.AgentOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One agent", responses={200: S.AgentDetailOut, **READ_ERRORS}),
)
class AgentViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = Agent.objects.select_related("model")
        return qs if self.request.user.is_staff else qs.filter(enabled=True)

    def get_serializer_class(self):
        return S.AgentDetailOut if self.action == "retrieve" else S.AgentOut


class AgentToolsApi(APIView):
    @extend_schema(summary="The agent's effective tool projection, with the reason for each decision", responses={200: S.ToolProjectionOut, **READ_ERRORS, 409: ERROR})
    def get(self, request, name: str):
        from toolcatalog.policy import PolicyError
        from toolcatalog.projection import resolve_tools

        qs = Agent.objects.all() if request.user.is_staff else Agent.objects.filter(enabled=True)
        agent = qs.filter(name=name).first()
        if agent is None:
            raise ApiError("not_found", f"no agent named {name!r}", status_code=404)
        try:
            projection = resolve_tools(agent.tool_policy or {})
        except PolicyError as exc:
            raise ApiError("invalid_agent_config", f"the agent's tool policy is invalid: {exc}", status_code=409) from exc
        return Response({"agent": agent.name, **projection.to_dict()})


@extend_schema_view(
    list=extend_schema(summary="Models (no secrets: only whether a key is configured)", responses={200: S.ModelOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One model", responses={200: S.ModelOut, **READ_ERRORS}),
)
class ModelViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.ModelOut
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = ModelConfig.objects.all()
        return qs if self.request.user.is_staff else qs.filter(enabled=True)


@extend_schema_view(
    list=extend_schema(summary="Skills in the registry", responses={200: S.SkillOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One skill", responses={200: S.SkillOut, **READ_ERRORS}),
)
class SkillViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.SkillOut
    pagination_class = SkillCursorPagination

    def get_queryset(self):
        qs = SkillResource.objects.all()
        if not self.request.user.is_staff:
            qs = qs.filter(status=SkillResource.Status.ACTIVE, disabled=False)
        return qs


@extend_schema_view(
    list=extend_schema(summary="Runs on the sessions you may read", parameters=[S.RunListQuery], responses={200: S.RunOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One run", responses={200: S.RunOut, **READ_ERRORS}),
)
class RunViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.RunOut
    lookup_field = "run_id"
    lookup_value_regex = r"[0-9a-fA-F-]{32,36}"
    pagination_class = RunCursorPagination

    def get_queryset(self):
        qs = AgentRun.objects.select_related("agent")
        user = self.request.user
        if not selectors.reads_all_sessions(user):
            qs = qs.filter(session_id__in=visible_sessions(user).values("session_id"))
        if self.action == "list":
            query = parse(S.RunListQuery, self.request.query_params)
            if "session" in query:
                qs = qs.filter(session_id=query["session"])
            if "status" in query:
                qs = qs.filter(status=query["status"])
        return qs


# --------------------------------------------------------------------------- who am I


class MeApi(APIView):
    @extend_schema(summary="Who the API sees (user, staff, token scope)", responses={200: S.MeOut, 401: ERROR})
    def get(self, request):
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Response(
            {
                "username": request.user.get_username(),
                "isStaff": request.user.is_staff,
                "auth": "token" if token else "session",
                "tokenScope": token.scope if token else None,
            }
        )


@method_decorator(ensure_csrf_cookie, name="get")
class CsrfApi(APIView):
    permission_classes = [permissions.AllowAny]
    authentication_classes = []

    @extend_schema(summary="Set the CSRF cookie for browser clients and return the token", responses={200: S.CsrfOut})
    def get(self, request):
        return Response({"csrfToken": get_token(request)})
