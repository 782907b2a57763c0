"""The session websocket: ``/ws/sessions/<session_id>/`` (protocol: docs/realtime.md).

Thin by design: authenticate and authorize on connect, join the session's
group, forward tree events strictly in revision order (filling gaps from the
event log), forward streaming events, and hand commands to the runtime's
services. ORM work goes through ``database_sync_to_async``; commands run as
tasks (one at a time per socket, in order) so a slow one — a branch summary
asks the model — never stalls event delivery.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass

import orjson
from channels.db import DatabaseSyncToAsync, database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import parse_cookie
from django.utils import translation
from django.utils.translation import trans_real
from rest_framework import serializers

from audit.context import audit_context, clean_request_id
from audit.models import Via
from infra.prepared import P, Prepared
from runtime.api import serializers as S
from runtime.api.errors import FieldError, classify
from runtime.api.parsers import JsonTooDeep, check_json
from runtime.api.parsers import loads as strict_loads
from runtime.api.permissions import is_read_only_token
from runtime.api.tokens import token_problem
from runtime.gateway.dispatch import serve
from runtime.models import ACTIVE_RUN_STATUSES, AgentRun, ApiToken
from runtime.realtime.groups import group_name, token_group, user_group
from runtime.realtime.messages import (
    DELETED_MESSAGE,
    RECHECK_MESSAGE,
    STREAM_MESSAGE,
    TREE_MESSAGE,
    WITHDRAWN_MESSAGE,
    carriable,
)
from runtime.realtime.publisher import event_publisher
from runtime.realtime.stream_events import STREAM_EVENTS_VERSION, run_state
from runtime.runs.prompts import run_abort, session_prompt, session_regenerate
from runtime.runs.questions import answer_question, decide_approval
from runtime.sessions.access import Access, session_access
from runtime.sessions.selectors import session_snapshot
from runtime.sessions.services import session_switch_leaf
from runtime.subagents import child_approvals
from sessions_tree import jsonl
from sessions_tree.errors import EntryNotFound, ResyncNeeded, SessionNotFound
from sessions_tree.models import AgentSession, SessionEvent
from sessions_tree.providers import provider_for_session
from sessions_tree.tree_events import TREE_EVENTS_VERSION

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# The shapes of the events this socket forwards (``hello.eventVersions``).
EVENT_VERSIONS = {"tree": TREE_EVENTS_VERSION, "stream": STREAM_EVENTS_VERSION}
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404  # no such session, or one the caller may not read (indistinguishable on purpose)
MAX_PENDING_COMMANDS = 16
MAX_REQUEST_ID = 64
COMMANDS = ("subscribe", "prompt", "regenerate", "abort", "switch_leaf", "answer", "approve", "ping")
WRITE_COMMANDS = ("prompt", "regenerate", "abort", "switch_leaf", "answer", "approve")
ACTIVE_STATES = ("queued", "running", "waiting")


# orjson refuses nesting past 254 levels (and the strings and numbers JSON over
# UTF-8 cannot carry); a stored entry may hold them (Pi keeps any depth): such a
# frame is sent as ``carriable``'s repaired copy.


def _dumps(value) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        # The REST renderer's repaired copy: stored data is never changed, only what is sent.
        return orjson.dumps(carriable(value), option=orjson.OPT_NON_STR_KEYS).decode()


class FrameError(Exception):
    def __init__(self, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.code, self.message, self.fields = code, message, fields


# --------------------------------------------------------------------------- sync parts (run in threads)


@dataclass(frozen=True)
class Binding:
    """What a socket was opened on: one session *row* (not just its id), by one user,
    with one token (or a cookie). Every check is made against these."""

    session_id: str
    session_pk: int
    user_pk: int
    token_pk: int | None


class Withdrawn(Exception):
    """The caller's rights on the socket are gone: send ``error`` ``code`` and close."""

    def __init__(self, close_code: int, code: str, message: str):
        super().__init__(message)
        self.close_code, self.code, self.message = close_code, code, message


def _open_session(user, token, session_id: str) -> tuple[AgentSession | None, Access]:
    """The session row and what ``user`` (with ``token``) may do with it."""
    meta = AgentSession.objects.filter(session_id=session_id).only("pk", "session_id", "user_id", "revision", "provider").first()
    return meta, session_access(user, meta, token=token)


# The statements of the rights check, the run state and the log reads, which every heartbeat
# (each socket every NETA_WS_HEARTBEAT_SECONDS) and every command make: compiled once
# (infra/prepared.py). Built and compiled by the ORM on each call they cost a heartbeat ~3.5
# ms of CPU; prepared, ~0.5 ms.
_USER = Prepared(lambda: get_user_model().objects.filter(pk=P("pk"))[:1])
_TOKEN_WITH_USER = Prepared(lambda: ApiToken.objects.select_related("user").filter(pk=P("pk"), user_id=P("user"))[:1])
_SESSION_ROW = Prepared(lambda: AgentSession.objects.filter(pk=P("pk"), session_id=P("session"))[:1])
_SESSION_ROW_KEY = Prepared(lambda: AgentSession.objects.filter(pk=P("pk"), session_id=P("session")).values_list("pk", flat=True)[:1])
_LOGGED_PAYLOAD = Prepared(
    lambda: SessionEvent.objects.filter(session_id=P("session"), revision=P("revision")).order_by("pk").values_list("payload", flat=True)[:1]
)
_ACTIVE_RUN_STATE = Prepared(
    lambda: AgentRun.objects.filter(session_id=P("session"), status__in=ACTIVE_RUN_STATUSES)
    .order_by("created_at", "pk")
    .values_list("run_id", "status", "error")[:1]
)
_LATEST_RUN_STATE = Prepared(
    lambda: AgentRun.objects.filter(session_id=P("session")).order_by("-created_at", "-pk").values_list("run_id", "status", "error")[:1]
)


def _check(binding: Binding, need: str = "read"):
    """The caller's current user and the session row, if they may still ``need`` it.

    ``Withdrawn`` when the user is inactive or gone, the token revoked, expired or
    gone (4401), or the session row deleted or no longer readable (4404);
    ``FrameError`` ``permission_denied`` when it may be read but not written.
    """

    token = None
    if binding.token_pk is None:
        user = _USER.first(pk=binding.user_pk)
    else:  # the token with its user, in one query
        token = _TOKEN_WITH_USER.first(pk=binding.token_pk, user=binding.user_pk)
        if token is None:
            raise Withdrawn(CLOSE_UNAUTHENTICATED, "authentication_failed", "token deleted")
        user = token.user
    if user is None or not user.is_active:
        raise Withdrawn(CLOSE_UNAUTHENTICATED, "authentication_failed", "user inactive")
    if token is not None and (problem := token_problem(token)) is not None:
        raise Withdrawn(CLOSE_UNAUTHENTICATED, "authentication_failed", problem)
    meta = _SESSION_ROW.first(pk=binding.session_pk, session=binding.session_id)
    access = session_access(user, meta, token=token)
    if not access.read:
        raise Withdrawn(CLOSE_NOT_FOUND, "session_not_found", f"session {binding.session_id} no longer exists")
    if need == "write" and not access.write:
        message = "this token is read-only" if token is not None and token.read_only else "you may read this session but not change it"
        raise FrameError("permission_denied", message)
    return user, meta


def _still_bound(binding: Binding) -> None:
    """``Withdrawn`` (4404) unless the socket's session row still holds its id."""
    if _SESSION_ROW_KEY.first(pk=binding.session_pk, session=binding.session_id) is None:
        raise Withdrawn(CLOSE_NOT_FOUND, "session_not_found", f"session {binding.session_id} no longer exists")


def _bound_read(binding: Binding, read):
    """``read(session_id)`` for the socket's own session row only.

    Reads go by id (the providers' interface); the row is checked before and after,
    and row keys are never reused, so what was read belongs to this row.
    """
    _check(binding)
    return _read_bound(binding, read)


def _read_bound(binding: Binding, read):
    """``read(session_id)``, the row checked after it (``_bound_read`` without the check before:
    for a caller that has just made it)."""
    try:
        result = read(binding.session_id)
    except SessionNotFound:
        _still_bound(binding)
        raise
    _still_bound(binding)
    return result


def _events_since(binding: Binding, revision: int) -> list[dict]:

    return _bound_read(binding, lambda sid: provider_for_session(sid).events_since(sid, revision))


def _snapshot(binding: Binding) -> dict:

    return _bound_read(binding, session_snapshot)


def _heartbeat_check(binding: Binding, since: int | None = None) -> tuple[int, dict | None, list[dict] | Exception | None]:
    """The session's revision and its run state (``_run_state``), after checking the caller's
    rights; when the revision is past ``since`` (the socket's), also the events after it
    (as ``_events_since``, without checking the rights a second time), or the
    ``ResyncNeeded``/``SessionNotFound`` that reading them raised. None: not read."""
    _, meta = _check(binding)
    gap: list[dict] | Exception | None = None
    if since is not None and meta.revision > since:
        try:
            gap = _read_bound(binding, lambda sid: provider_for_session(sid).events_since(sid, since))
        except (ResyncNeeded, SessionNotFound) as exc:
            gap = exc
    return meta.revision, _run_state(binding), gap


def _run_state(binding: Binding) -> dict | None:
    """The ``run_state`` event of the session's current run: its oldest active one, else
    its latest (terminal) one; None when it never had a run."""

    run = _ACTIVE_RUN_STATE.first(session=binding.session_id) or _LATEST_RUN_STATE.first(session=binding.session_id)
    if run is None:
        return None
    return run_state(run_id=run[0], state=run[1], error=run[2])


def _subscribed_run_state(binding: Binding) -> dict | None:
    return _bound_read(binding, lambda sid: _run_state(binding))


def _logged_event(binding: Binding, revision: int) -> dict | None:

    payload = _LOGGED_PAYLOAD.first(session=binding.session_pk, revision=revision)
    return jsonl.loads(payload) if payload is not None else None


def _prompt(session_id: str, user, data: dict) -> dict:

    try:
        outcome = session_prompt(
            session_id=session_id,
            text=data["text"],
            actor=user,
            images=[dict(i) for i in data.get("images") or []],
            documents=[dict(d) for d in data.get("documents") or []],
            from_entry_id=data.get("fromEntryId") or None,
            mode=data["mode"],
            model_name=data.get("model") or None,
            thinking_level=data.get("thinkingLevel") or None,
        )
    except EntryNotFound as exc:
        raise FieldError("fromEntryId", exc) from exc
    return {"runId": str(outcome.run.run_id), "queuedAs": outcome.queued_as, "editorText": outcome.editor_text}


def _regenerate(session_id: str, user, data: dict) -> dict:

    try:
        run = session_regenerate(session_id=session_id, entry_id=data["entryId"], actor=user, model_name=data.get("model") or None)
    except EntryNotFound as exc:
        raise FieldError("entryId", exc) from exc
    return {"runId": str(run.run_id)}


def _abort(session_id: str, user, data: dict) -> dict:

    run = run_abort(session_id=session_id, actor=user)
    return {"runId": str(run.run_id) if run else None, "status": run.status if run else None}


def _answer(session_id: str, user, data: dict) -> dict:

    run = answer_question(session_id=session_id, tool_call_id=data["toolCallId"], answer=data["answer"], actor=user)
    return {"runId": str(run.run_id), "status": run.status}


def _approve(session_id: str, user, data: dict) -> dict:

    if data.get("subagentRunId") is not None:
        row = child_approvals.decide(
            session_id=session_id, subagent_run_id=data["subagentRunId"], tool_call_id=data["toolCallId"], decision=data["decision"],
            scope=data["scope"], prefix=data["prefix"], note=data["note"], actor=user,
        )  # fmt: skip
        return {"subagentRunId": str(row.subprocess_run.run_id), "toolCallId": row.tool_call_id, "status": row.status}
    run = decide_approval(
        session_id=session_id, tool_call_id=data["toolCallId"], decision=data["decision"], scope=data["scope"],
        prefix=data["prefix"], note=data["note"], actor=user,
    )  # fmt: skip
    return {"runId": str(run.run_id), "status": run.status}


def _switch_leaf(session_id: str, user, data: dict) -> dict:

    try:
        result = session_switch_leaf(
            session_id=session_id,
            entry_id=data["entryId"],
            actor=user,
            summarize=data["summarize"],
            instructions=data.get("instructions") or None,
        )
    except EntryNotFound as exc:
        raise FieldError("entryId", exc) from exc
    summary = result.get("summaryEntry")
    return {"leafId": result["leafId"], "editorText": result["editorText"], "summaryEntryId": summary["id"] if summary else None}


def _run_checked(binding: Binding, kind: str, data: dict, request_id=None) -> dict:
    """A command, after checking (in the same thread, just before) that the caller may still write."""
    user, _ = _check(binding, "write")
    with audit_context(via=Via.SOCKET, request_id=clean_request_id(request_id)):  # staff writes name the socket
        return COMMAND_CALLS[kind](binding.session_id, user, data)


GATEWAY_MESSAGES = {
    TREE_MESSAGE: "tree_event",
    STREAM_MESSAGE: "stream_event",
    DELETED_MESSAGE: "session_deleted",
    WITHDRAWN_MESSAGE: "access_withdrawn",
    RECHECK_MESSAGE: "access_recheck",
}
COMMAND_INPUTS = {
    "prompt": S.PromptInput, "regenerate": S.RegenerateInput, "switch_leaf": S.SwitchLeafInput, "abort": None, "answer": S.AnswerInput,
    "approve": S.ApproveInput,
}  # fmt: skip
COMMAND_CALLS = {"prompt": _prompt, "regenerate": _regenerate, "abort": _abort, "switch_leaf": _switch_leaf, "answer": _answer, "approve": _approve}


# --------------------------------------------------------------------------- the consumer


def scope_language(scope) -> str:
    """The language a socket's messages are in: as LocaleMiddleware picks it for a page (the
    language cookie, which holds the user's setting, else Accept-Language, else English)."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers") or []}
    wanted = [parse_cookie(headers.get("cookie", "")).get(settings.LANGUAGE_COOKIE_NAME) or ""]
    wanted += [code for code, _quality in trans_real.parse_accept_lang_header(headers.get("accept-language", "")[:500]) if code != "*"]
    for code in wanted:
        if code:
            try:
                return translation.get_supported_language_variant(code)
            except LookupError:
                continue
    return settings.LANGUAGE_CODE


class SessionConsumer(AsyncWebsocketConsumer):
    """One browser or integration watching (and driving) one session.

    Bound at connect to the session's row (its primary key), the user and the
    token: every command, every heartbeat and every forwarded event is checked
    against them (docs/realtime.md, "Rights on an open socket").
    """

    async def connect(self):
        event_publisher.bind_server_loop(asyncio.get_running_loop())
        self.session_id = self.scope["url_route"]["kwargs"]["session_id"]
        self.group = group_name(self.session_id)
        self.groups_joined: list[str] = []
        self.revision: int | None = None  # last revision sent; None: not subscribed
        self.gone = False
        self.closing = False
        self.heartbeat: asyncio.Task | None = None
        # Layer messages, subscribes and heartbeats change what was sent (revision, run
        # state): one at a time, in the order they take this lock.
        self.delivery = asyncio.Lock()
        self.run_sent: tuple[str | None, str] | None = None  # (runId, state) of the last run_state sent
        self.commands: set[asyncio.Task] = set()
        self.command_lock = asyncio.Lock()
        self.language = scope_language(self.scope)
        user = self.scope.get("user")
        if self.scope.get("auth_error") or user is None or not user.is_authenticated or not user.is_active:
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = getattr(user, "_wrapped", user)
        token = self.scope.get("api_token")
        meta, access = await database_sync_to_async(_open_session)(self.user, token, self.session_id)
        if not access.read:
            await self.accept()
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.binding = Binding(self.session_id, meta.pk, self.user.pk, token.pk if token is not None else None)
        self.read_only = not access.write
        groups = [self.group, user_group(self.user.pk)]
        if token is not None:
            groups.append(token_group(token.pk))
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()
        # Rights withdrawn while we joined (the message may have gone before we listened).
        try:
            await database_sync_to_async(_check)(self.binding)
        except Withdrawn as exc:
            await self._withdraw(exc)
            return
        self.heartbeat = asyncio.create_task(self._beat())
        await self._send(
            {
                "type": "hello",
                "protocol": PROTOCOL_VERSION,
                "eventVersions": EVENT_VERSIONS,
                "sessionId": self.session_id,
                "revision": meta.revision,
                "readOnly": self.read_only,
                "heartbeatSeconds": settings.NETA_WS_HEARTBEAT_SECONDS,
                "commands": [c for c in COMMANDS if not (self.read_only and c in WRITE_COMMANDS)],
            }
        )

    async def __call__(self, scope, receive, send):
        """Channels' consumer entry, with a lighter receive loop (``runtime.gateway.dispatch``)."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.channel_name = await self.channel_layer.new_channel()
        self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
        self.base_send = send
        try:
            await serve((receive, self.channel_receive), self.dispatch)
        except StopConsumer:
            pass

    async def dispatch(self, message):
        # Channels closes stale DB connections (a thread hop) before every message;
        # the gateway's own messages reach the DB only through database_sync_to_async,
        # which does that in its thread. Skipping it here halves the cost per frame.
        # Then whatever the in-process layer already holds for this socket is handled
        # here too, in order, instead of one wake-up (and task) per message. Only after a
        # layer message: its receive has finished and the next is not started, so nothing
        # taken here can overtake a message a receive already holds (after a client frame
        # one may: handled in turn by Channels).
        take = getattr(self.channel_layer, "receive_nowait", None) if message["type"] in GATEWAY_MESSAGES else None
        while message is not None:
            if message["type"] not in GATEWAY_MESSAGES:
                await super().dispatch(message)
            elif not self.closing:
                async with self.delivery:
                    try:
                        await getattr(self, GATEWAY_MESSAGES[message["type"]])(message)
                    except Exception:
                        # A failed read (the database slow or away) must not end the socket:
                        # the heartbeat refills tree events from the log and re-checks rights.
                        logger.exception("socket %s could not handle %s", self.session_id, message["type"])
            message = take(self.channel_name) if take is not None and not self.gone else None

    async def disconnect(self, code):
        self.gone = True
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    async def _send(self, frame: dict) -> None:
        if not self.gone and not self.closing:  # a command may finish after the client left
            await self.send(text_data=_dumps(frame))

    async def _error(self, code: str, message: str, *, request_id=None, fields: dict | None = None) -> None:
        frame = {"type": "error", "code": code, "message": message}
        if fields:
            frame["fields"] = fields
        if request_id is not None:
            frame["requestId"] = request_id
        await self._send(frame)

    async def _withdraw(self, exc: Withdrawn, request_id=None) -> None:
        """The caller's rights are gone: say why, close, and forward nothing more."""
        if self.closing:
            return
        await self._error(exc.code, exc.message, request_id=request_id)
        self.closing = True
        self.revision = None
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        if not self.gone:
            await self.close(code=exc.close_code)

    # ------------------------------------------------------------------ client frames

    async def receive(self, text_data=None, bytes_data=None):
        if self.closing:
            return
        # Refusals and errors in the reader's language; codes and fields stay as they are.
        with translation.override(self.language):
            await self._receive(text_data, bytes_data)

    async def _receive(self, text_data, bytes_data):
        request_id = None
        try:
            frame = self._parse(text_data, bytes_data)
            request_id = frame.get("requestId")
            kind = frame["type"]
            if kind == "ping":
                await database_sync_to_async(_check)(self.binding)
                await self._send({"type": "pong", "requestId": request_id})
            elif kind == "subscribe":
                async with self.delivery:
                    await self._subscribe(frame, request_id)
            else:
                await self._command(kind, frame, request_id)
        except FrameError as exc:
            await self._error(exc.code, exc.message, request_id=request_id, fields=exc.fields)
        except Withdrawn as exc:
            await self._withdraw(exc, request_id)
        except Exception:
            # Anything else (a database error on a loaded machine, ...) answers this frame and
            # leaves the socket open: the client may send it again. Raising here would end the
            # consumer and Daphne would close the socket with 1011.
            logger.exception("socket frame failed on %s", self.session_id)
            await self._error("server_error", "internal error (logged on the server); send the frame again", request_id=request_id)

    def _parse(self, text_data, bytes_data) -> dict:
        if text_data is None:
            raise FrameError("binary_frame", "frames are JSON text; binary frames are not accepted")
        limit = settings.NETA_WS_MAX_FRAME_BYTES
        if len(text_data) > limit or len(text_data.encode("utf-8", "surrogatepass")) > limit:
            raise FrameError("frame_too_large", f"frames are limited to {limit} bytes (send large uploads through the REST API)")
        # The REST parser's rules (runtime/api/parsers.py): nesting bounded, lone
        # surrogate escapes replaced by U+FFFD (orjson refuses them, JSON.parse
        # takes them), non-finite numbers refused. orjson stops at depth 1024 itself.

        try:
            try:
                frame = check_json(orjson.loads(text_data))
            except orjson.JSONDecodeError:
                frame = strict_loads(text_data)
        except JsonTooDeep as exc:
            raise FrameError("invalid_json", str(exc)) from None
        except ValueError as exc:
            raise FrameError("invalid_json", f"not JSON: {exc}") from None
        if not isinstance(frame, dict):
            raise FrameError("invalid_frame", "a frame is a JSON object with a string 'type'")
        request_id = frame.get("requestId")
        if request_id is not None and not (
            (isinstance(request_id, str) and len(request_id) <= MAX_REQUEST_ID)
            or (isinstance(request_id, int) and not isinstance(request_id, bool))
        ):
            frame.pop("requestId")
            raise FrameError("invalid_frame", f"requestId must be a string (at most {MAX_REQUEST_ID} chars) or an integer", {"requestId": ["invalid"]})
        kind = frame.get("type")
        if not isinstance(kind, str):
            raise FrameError("invalid_frame", "a frame is a JSON object with a string 'type'", {"type": ["required"]})
        if kind not in COMMANDS:
            raise FrameError("unknown_command", f"unknown frame type {kind[:64]!r} (expected one of {', '.join(COMMANDS)})")
        return frame

    async def _subscribe(self, frame: dict, request_id) -> None:
        since = frame.get("sinceRevision")
        if since is not None and (not isinstance(since, int) or isinstance(since, bool) or since < 0):
            raise FrameError("invalid_frame", "sinceRevision must be a non-negative integer or null", {"sinceRevision": ["invalid"]})
        if since is None:
            try:
                snapshot = await database_sync_to_async(_snapshot)(self.binding)
            except SessionNotFound as exc:
                raise FrameError(exc.code, str(exc)) from None
            text = _dumps({"type": "snapshot", "requestId": request_id, "snapshot": snapshot})
            if len(text.encode("utf-8")) > settings.NETA_WS_MAX_FRAME_BYTES:
                # Websocket peers refuse frames past ~1 MiB: a big session's snapshot goes over HTTP.
                raise FrameError(
                    "snapshot_too_large",
                    f"the snapshot is over {settings.NETA_WS_MAX_FRAME_BYTES} bytes; fetch it from "
                    f"GET /api/sessions/{self.session_id}/snapshot/ and subscribe with its revision",
                )
            self.revision = snapshot["revision"]
            if not self.gone and not self.closing:
                await self.send(text_data=text)
            await self._send({"type": "subscribed", "requestId": request_id, "revision": self.revision, "replayed": 0})
            await self._send_run_state(replayed=0)
            return
        self.revision = None
        try:
            events = await database_sync_to_async(_events_since)(self.binding, since)
        except (ResyncNeeded, SessionNotFound) as exc:
            raise FrameError(exc.code, str(exc)) from None
        self.revision = since
        for event in events:
            await self._send(event)
            self.revision = event["revision"]
        await self._send({"type": "subscribed", "requestId": request_id, "revision": self.revision, "replayed": len(events)})
        await self._send_run_state(replayed=len(events))

    async def _send_run_state(self, *, replayed: int) -> None:
        """After ``subscribed``: the run's state as it is now when the run is active, or
        when it ended and events were replayed (the client was away while things
        happened: it may have missed the end). The heartbeat sends it on any later change."""
        try:
            state = await database_sync_to_async(_subscribed_run_state)(self.binding)
        except SessionNotFound:
            return
        except Withdrawn:
            raise
        except Exception:
            # Subscribed already: the next heartbeat sends the run's state (run_sent stays unset).
            logger.exception("socket %s could not read its run state after subscribe", self.session_id)
            return
        if state is None or self.revision is None:
            return
        self.run_sent = (state["runId"], state["state"])
        if state["state"] in ACTIVE_STATES or replayed > 0:
            await self._send(state)

    async def _command(self, kind: str, frame: dict, request_id) -> None:
        if self.read_only:
            message = "this token is read-only" if is_read_only_token(self.scope.get("api_token")) else "you may read this session but not change it"
            raise FrameError("permission_denied", message)
        serializer_cls = COMMAND_INPUTS[kind]
        data: dict = {}
        if serializer_cls is not None:
            serializer = serializer_cls(data=frame)
            if not serializer.is_valid():
                info = classify(serializers.ValidationError(serializer.errors))
                raise FrameError("invalid", info.message, info.fields)
            data = dict(serializer.validated_data)
        if len(self.commands) >= MAX_PENDING_COMMANDS:
            raise FrameError("too_many_commands", f"at most {MAX_PENDING_COMMANDS} commands may be pending per socket")
        task = asyncio.create_task(self._run_command(kind, data, request_id))
        self.commands.add(task)
        task.add_done_callback(self.commands.discard)

    async def _run_command(self, kind: str, data: dict, request_id) -> None:
        async with self.command_lock:  # a socket's commands run in the order they came
            if self.closing:
                return
            try:
                # Not thread-sensitive: a slow command must not hold the process's shared ORM thread.
                result = await DatabaseSyncToAsync(_run_checked, thread_sensitive=False)(self.binding, kind, data, request_id)
            except Withdrawn as exc:
                await self._withdraw(exc, request_id)
                return
            except FrameError as exc:
                await self._error(exc.code, exc.message, request_id=request_id, fields=exc.fields)
                return
            except Exception as exc:
                info = classify(exc)
                if info is None:
                    logger.exception("socket command %s failed on %s", kind, self.session_id)
                    await self._error("server_error", "internal error (logged on the server)", request_id=request_id)
                else:
                    await self._error(info.code, info.message, request_id=request_id, fields=info.fields)
                return
        await self._send({"type": "ack", "command": kind, "requestId": request_id, "result": result})

    # ------------------------------------------------------------------ group messages

    def _ours(self, message: dict) -> bool:
        """Whether a session-group message is about this socket's session row (not a
        later session that took the same id)."""
        return message.get("sessionKey") == self.binding.session_pk

    async def tree_event(self, message: dict) -> None:
        if self.revision is None or not self._ours(message):
            return
        revision = message["revision"]
        if revision <= self.revision:
            return  # already sent (replayed, or filled from the log)
        event = message.get("event")
        if revision == self.revision + 1 and event is None:
            event = await database_sync_to_async(_logged_event)(self.binding, revision)
        if revision == self.revision + 1 and event is not None:
            await self._send(self._traced(event, message))
            self.revision = revision
            return
        await self._fill_gap()

    async def stream_event(self, message: dict) -> None:
        if self.revision is not None and self._ours(message):
            event = message["event"]
            if event.get("type") == "run_state":
                self.run_sent = (event.get("runId"), event.get("state"))
            await self._send(self._traced(event, message))

    async def session_deleted(self, message: dict) -> None:
        if self._ours(message):
            await self._withdraw(Withdrawn(CLOSE_NOT_FOUND, "session_not_found", f"session {self.session_id} was deleted"))

    async def access_withdrawn(self, message: dict) -> None:
        await self._withdraw(Withdrawn(CLOSE_UNAUTHENTICATED, message.get("code") or "authentication_failed", message.get("message") or "access withdrawn"))

    async def access_recheck(self, message: dict) -> None:
        """The user's roles or permissions changed: lose what they no longer allow, now."""
        try:
            await database_sync_to_async(_check)(self.binding, "write")
            self.read_only = False
        except FrameError:
            self.read_only = True  # may still read: commands answer permission_denied
        except Withdrawn as exc:
            await self._withdraw(exc)

    @staticmethod
    def _traced(event: dict, message: dict) -> dict:
        if settings.NETA_REALTIME_TRACE and "emittedAt" in message:
            return {**event, "emittedAt": message["emittedAt"]}
        return event

    async def _heartbeat(self) -> None:
        """Check rights, say the socket is alive, refresh group membership, and make good
        what the layer lost: tree events (from the log) and the run's state."""
        try:
            current, run, gap = await database_sync_to_async(_heartbeat_check)(self.binding, self.revision)
        except Withdrawn as exc:
            await self._withdraw(exc)
            return
        await self._send({"type": "heartbeat", "revision": self.revision})
        try:
            for group in self.groups_joined:
                await self.channel_layer.group_add(group, self.channel_name)  # refresh group expiry
        except Exception as exc:  # the layer is down: the log and the next beat make good what it loses
            logger.warning("heartbeat of %s could not refresh its groups: %s", self.channel_name, exc)
        if self.revision is not None and current > self.revision:
            await self._fill_gap(gap)  # a doorbell message was lost: catch up from the log
        if self.revision is not None and run is not None and self.run_sent != (run["runId"], run["state"]):
            # A run_state was lost (or the socket never saw this run): say where the run is now.
            self.run_sent = (run["runId"], run["state"])
            await self._send(run)

    async def _fill_gap(self, read: list[dict] | Exception | None = None) -> None:
        """Send the logged events after ``self.revision``; ``read``: what the heartbeat's
        check already read of them (``_heartbeat_check``), else they are read here."""
        try:
            if isinstance(read, Exception):
                raise read
            events = read if read is not None else await database_sync_to_async(_events_since)(self.binding, self.revision)
        except Withdrawn as exc:
            await self._withdraw(exc)
            return
        except (ResyncNeeded, SessionNotFound) as exc:
            self.revision = None
            await self._error(exc.code, str(exc))
            return
        for event in events:
            if self.revision is not None and event["revision"] > self.revision:
                await self._send(event)
                self.revision = event["revision"]

    async def _beat(self) -> None:
        """The heartbeat task. It does not go through the channel layer (a full or broken
        layer must not stop it: the beat is what repairs what the layer lost) and no
        error ends it; it runs under the delivery lock, in turn with every layer message."""
        interval = settings.NETA_WS_HEARTBEAT_SECONDS
        failures = 0
        while not (self.gone or self.closing):
            try:
                await asyncio.sleep(interval)
                async with self.delivery:
                    if not (self.gone or self.closing):
                        await self._heartbeat()
                failures = 0
            except asyncio.CancelledError:
                return
            except Exception:
                failures += 1
                if failures == 1 or failures % 20 == 0:  # the database is down: say so, not every beat
                    logger.exception("heartbeat failed for %s (%d in a row)", self.channel_name, failures)


class UnknownSocketConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: accepted only to be closed with 4404."""

    async def connect(self):
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)
