"""Publishing to the realtime gateway: tree events and streaming events → session groups.

Two producers feed the Channels layer, from whatever process does the work (the
web process with the inline backend, a Celery worker with the celery backend):

* ``publish_tree_event`` — registered with ``sessions_tree.events.add_publisher``,
  called after commit for every tree event;
* ``ChannelsStreamSink`` — installed with ``runtime.streaming.set_default_sink``,
  called by the turn loop for every (already coalesced) streaming event.

Both are called from synchronous code in arbitrary threads and must never block
the write path. They hand messages to one *sender* per process that owns an
event loop and a FIFO queue, so messages leave in the order they were produced:

* with a cross-process layer (Redis) the sender runs its own daemon thread and
  loop (started lazily, restarted after a fork: Celery's prefork children);
* with the in-memory layer only consumers in this process can listen, and the
  layer's queues belong to the server's event loop, so the sender runs on that
  loop (``bind_server_loop`` is called by every consumer on connect). With no
  consumer there is nobody to tell and messages are dropped.

The layer is a lossy doorbell: ordering and completeness come from revisions
and the event log. Payloads stay small: a tree event larger than
``NETA_REALTIME_INLINE_BYTES`` travels as a reference (session, revision) and
the consumer reads it from the event log; oversized streaming deltas are split
and other oversized streaming fields are left out (``omitted`` names them).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from typing import Any

import orjson
from django.conf import settings

from sessions_tree.events import SESSION_DELETED

logger = logging.getLogger(__name__)

GROUP_PREFIX = "neta.session."
USER_GROUP_PREFIX = "neta.user."
TOKEN_GROUP_PREFIX = "neta.token."
_GROUP_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TREE_MESSAGE = "tree.event"
STREAM_MESSAGE = "stream.event"
# The session's row was deleted: its sockets send ``session_not_found`` and close (4404).
DELETED_MESSAGE = "session.deleted"
# A user was deactivated or a token revoked: their sockets close (4401).
WITHDRAWN_MESSAGE = "access.withdrawn"
# A user's roles or permissions changed: their sockets check their rights again now.
RECHECK_MESSAGE = "access.recheck"
SPLIT_TYPES = ("assistant_stream_delta", "tool_call_delta")
ALWAYS_KEPT = frozenset({"type", "sessionId", "entryId", "runId", "contentIndex", "toolCallId", "kind", "name", "state", "stopReason"})
_QUEUE_LIMIT = 10_000


def group_name(session_id: str) -> str:
    """The Channels group of one session.

    Channels allows ``[A-Za-z0-9_.-]`` and fewer than 100 characters; Neta's ids
    (UUIDv7) fit, an imported Pi file may carry any string, which is hashed.
    """
    if _GROUP_SAFE.match(session_id):
        return GROUP_PREFIX + session_id
    return GROUP_PREFIX + "h." + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def user_group(user_pk: int) -> str:
    """Every socket a user opened (cookie or token)."""
    return f"{USER_GROUP_PREFIX}{int(user_pk)}"


def token_group(token_pk: int) -> str:
    """Every socket opened with one integration token."""
    return f"{TOKEN_GROUP_PREFIX}{int(token_pk)}"


def session_key(session_id: str) -> int | None:
    """The primary key of the session row that holds ``session_id`` now (None: none does).

    Every message for a session's group carries it as ``sessionKey``; a socket
    forwards only messages of the row it was opened on, so a session deleted and
    replaced by another one under the same id (an import) never reaches the
    first one's sockets.
    """
    from sessions_tree.models import AgentSession

    return AgentSession.objects.filter(session_id=session_id).values_list("pk", flat=True).first()


# Streaming events are published up to NETA_STREAM_RATE times a second per run: they take
# the row's key from a cache a second old at most, not a query each (tree events ask).
STREAM_KEY_SECONDS = 1.0
_STREAM_KEYS_MAX = 4096
_stream_keys: dict[str, tuple[float, int | None]] = {}


def stream_session_key(session_id: str) -> int | None:
    now = time.monotonic()
    cached = _stream_keys.get(session_id)
    if cached is not None and now - cached[0] < STREAM_KEY_SECONDS:
        return cached[1]
    key = session_key(session_id)
    if len(_stream_keys) >= _STREAM_KEYS_MAX:
        _stream_keys.clear()
    _stream_keys[session_id] = (now, key)
    return key


def inline_limit() -> int:
    return int(getattr(settings, "NETA_REALTIME_INLINE_BYTES", 64 * 1024))


def encoded_size(value: Any) -> int:
    return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


# orjson (and msgpack, Redis's encoding) refuse lone surrogates and nesting past 254
# levels; a model's reply may stream them (stored entries are normalized on append).
CARRY_DEPTH = 200


def carriable(event: dict) -> dict:
    """``event`` itself when JSON over UTF-8 carries it, else the REST renderer's
    repaired copy (U+FFFD, deep parts cut): a streaming or tree event must never fail
    the producer (a run) nor be lost to the layer."""
    try:
        orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS)
        return event
    except (TypeError, orjson.JSONEncodeError):
        from runtime.api.renderers import renderable

        copy = renderable(event, limit=CARRY_DEPTH)
        try:
            orjson.dumps(copy, option=orjson.OPT_NON_STR_KEYS)
            return copy
        except (TypeError, orjson.JSONEncodeError):  # integers past 64 bits: as JavaScript reads them
            return json.loads(json.dumps(copy), parse_int=_js_int)


def _js_int(text: str) -> int | float | None:
    value = int(text)
    if -(2**63) <= value < 2**64:
        return value
    number = float(text)
    return number if math.isfinite(number) else None


# --------------------------------------------------------------------------- message shapes


def tree_message(session_id: str, event: dict, *, key: int | None = None, limit: int | None = None) -> dict:
    """The layer message for one tree event: inline when small, else a reference.

    ``emittedAt`` (epoch seconds) is when the producer handed it over; consumers
    forward it only when ``NETA_REALTIME_TRACE`` is on (benchmarks, diagnostics).
    """
    limit = inline_limit() if limit is None else limit
    event = carriable(event)
    message = {
        "type": TREE_MESSAGE,
        "sessionId": session_id,
        "sessionKey": key,
        "revision": event["revision"],
        "event": event,
        "emittedAt": time.time(),
    }
    if encoded_size(event) > limit:
        message["event"] = None  # the consumer reads it from the event log
        message["eventType"] = event.get("type")
    return message


def stream_messages(session_id: str, event: dict, *, key: int | None = None, limit: int | None = None) -> list[dict]:
    """The layer messages for one streaming event (several when a delta is split)."""
    limit = inline_limit() if limit is None else limit
    now = time.time()
    event = carriable(event)
    if encoded_size(event) <= limit:
        return [{"type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "event": event, "emittedAt": now}]
    if event.get("type") in SPLIT_TYPES and isinstance(event.get("delta"), str):
        # Deltas concatenate, so a large one is sent as consecutive smaller ones.
        step = max(1, limit // 8)  # a char is at most 6 bytes JSON-escaped; keep room for the rest
        text = event["delta"]
        return [
            {"type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "event": {**event, "delta": text[i : i + step]}, "emittedAt": now}
            for i in range(0, len(text), step)
        ]
    small: dict = {}
    omitted: list[str] = []
    budget = max(256, limit // 16)
    for key, value in event.items():
        if key in ALWAYS_KEPT or encoded_size(value) <= budget:
            small[key] = value
        elif key == "toolCall" and isinstance(value, dict):
            small[key] = {k: value[k] for k in ("type", "id", "name") if k in value}
            omitted.append("toolCall.arguments")
        else:
            omitted.append(key)
    small["omitted"] = omitted
    return [{"type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "event": small, "emittedAt": now}]


# --------------------------------------------------------------------------- the in-process layer


def _in_memory_base():
    from channels.layers import InMemoryChannelLayer

    return InMemoryChannelLayer


class InProcessChannelLayer(_in_memory_base()):
    """Channels' in-memory layer, made to scale with the number of sockets.

    The stock layer scans every channel for expired messages on every receive
    and every group send (O(sockets) per message, O(sockets²) per broadcast)
    and deep-copies each message for each member. Here expiry runs at most
    every ``clean_interval`` seconds, a group send is a plain loop, and members
    get a shallow copy: nested values are shared and must be treated as
    read-only (the gateway's consumers never modify what they receive).
    """

    def __init__(self, *, clean_interval: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.clean_interval = clean_interval
        self._cleaned_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= self.clean_interval:
            self._cleaned_at = now
            super()._clean_expired()

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((time.time() + self.expiry, dict(message)))
        except asyncio.QueueFull:
            from channels.exceptions import ChannelFull

            raise ChannelFull(channel) from None

    async def group_send(self, group, message):
        from channels.exceptions import ChannelFull

        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # a stuck consumer loses doorbells; the event log fills its gap


# --------------------------------------------------------------------------- the sender


class _Sender:
    """A FIFO of (group, message) drained by one task on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, layer):
        self.loop = loop
        self.layer = layer
        self.pid = os.getpid()
        self.queue: asyncio.Queue | None = None
        self.dropped = 0
        self.sent = 0
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        self.queue = asyncio.Queue(maxsize=_QUEUE_LIMIT)
        self.task = self.loop.create_task(self._drain())

    def submit(self, items: list[tuple[str, dict]]) -> bool:
        if self.loop.is_closed():
            return False
        try:
            self.loop.call_soon_threadsafe(self._put, items)
        except RuntimeError:  # the loop closed meanwhile
            return False
        return True

    def _put(self, items: list[tuple[str, dict]]) -> None:
        for item in items:
            try:
                self.queue.put_nowait(item)
            except asyncio.QueueFull:
                self.dropped += 1  # the doorbell is lossy; the event log is not

    async def _drain(self) -> None:
        while True:
            group, message = await self.queue.get()
            try:
                await self.layer.group_send(group, message)
                self.sent += 1
            except Exception:
                self.dropped += 1
                logger.exception("could not publish to %s", group)
            finally:
                self.queue.task_done()

    async def _drained(self) -> None:
        await self.queue.join()

    def flush(self, timeout: float) -> bool:
        """Wait (from another thread) until everything submitted so far has left."""
        if self.loop.is_closed():
            return False
        future = asyncio.run_coroutine_threadsafe(self._drained(), self.loop)
        try:
            future.result(timeout)
            return True
        except Exception:
            future.cancel()
            return False


class Gateway:
    """Where this process's realtime messages go (one instance per process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sender: _Sender | None = None
        self._server_loop: asyncio.AbstractEventLoop | None = None

    def _layer(self):
        from channels.layers import get_channel_layer

        return get_channel_layer()

    @staticmethod
    def _in_process_layer(layer) -> bool:
        from channels.layers import InMemoryChannelLayer

        return isinstance(layer, InMemoryChannelLayer)

    def bind_server_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by consumers: the loop that owns the in-memory layer's queues."""
        if self._server_loop is loop:
            return
        with self._lock:
            self._server_loop = loop
            layer = self._layer()
            if layer is not None and self._in_process_layer(layer):
                self._sender = _Sender(loop, layer)

    def _current_sender(self) -> _Sender | None:
        sender = self._sender
        layer = self._layer()
        if sender is not None and sender.pid == os.getpid() and not sender.loop.is_closed() and sender.layer is layer:
            return sender
        with self._lock:
            sender = self._sender
            if sender is not None and sender.pid == os.getpid() and not sender.loop.is_closed() and sender.layer is layer:
                return sender
            if layer is None:
                return None
            if self._in_process_layer(layer):
                loop = self._server_loop
                if loop is None or loop.is_closed():
                    self._sender = None
                    return None  # no consumer in this process: nobody to tell
                self._sender = _Sender(loop, layer)
            else:
                self._sender = _Sender(_background_loop(), layer)
            return self._sender

    def send(self, items: list[tuple[str, dict]]) -> None:
        sender = self._current_sender()
        if sender is not None:
            sender.submit(items)

    def listening(self) -> bool:
        """Whether anyone could receive what this process sends (else skip the work)."""
        return self._current_sender() is not None

    def publish_tree_event(self, session_id: str, event: dict) -> None:
        if not self.listening():
            return
        if event.get("type") == SESSION_DELETED:
            _stream_keys.pop(session_id, None)
            message = {"type": DELETED_MESSAGE, "sessionId": session_id, "sessionKey": event.get("sessionPk")}
            self.send([(group_name(session_id), message)])
            return
        key = session_key(session_id)
        self.send([(group_name(session_id), tree_message(session_id, event, key=key))])

    def publish_stream_event(self, session_id: str, event: dict) -> None:
        if not self.listening():
            return
        group = group_name(session_id)
        key = stream_session_key(session_id)
        self.send([(group, m) for m in stream_messages(session_id, event, key=key)])

    def withdraw(self, groups: list[str], *, code: str, message: str) -> None:
        """Close every socket in ``groups`` with 4401, after the current transaction commits."""
        self._after_commit(groups, {"type": WITHDRAWN_MESSAGE, "code": code, "message": message})

    def recheck(self, groups: list[str]) -> None:
        """Make every socket in ``groups`` check its rights, after the current transaction commits."""
        self._after_commit(groups, {"type": RECHECK_MESSAGE})

    def _after_commit(self, groups: list[str], payload: dict) -> None:
        from django.db import transaction

        if groups:
            transaction.on_commit(lambda: self.send([(group, payload) for group in groups]))


_bg_lock = threading.Lock()
_bg: tuple[int, asyncio.AbstractEventLoop] | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """This process's publishing loop (a daemon thread; recreated after a fork)."""
    global _bg
    with _bg_lock:
        if _bg is not None and _bg[0] == os.getpid() and not _bg[1].is_closed():
            return _bg[1]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="neta-realtime-publisher", daemon=True)
        thread.start()
        if _bg is None:
            # A short-lived process (a management command revoking a token) still rings its doorbells.
            atexit.register(_flush_at_exit)
        _bg = (os.getpid(), loop)
        return loop


def _flush_at_exit() -> None:
    sender = gateway._sender
    if sender is not None and sender.pid == os.getpid() and _bg is not None and sender.loop is _bg[1]:
        sender.flush(timeout=2.0)


gateway = Gateway()


def publish_tree_event(session_id: str, event: dict) -> None:
    """The kernel's publisher (``sessions_tree.events.add_publisher``): tree events and
    the ``session_deleted`` notice."""
    gateway.publish_tree_event(session_id, event)


def withdraw_user(user_pk: int, reason: str = "user inactive") -> None:
    """The user was deactivated (or deleted): close their sockets (4401)."""
    gateway.withdraw([user_group(user_pk)], code="authentication_failed", message=reason)


def withdraw_token(token_pk: int, reason: str = "token revoked") -> None:
    """The token was revoked (or deleted): close the sockets opened with it (4401)."""
    gateway.withdraw([token_group(token_pk)], code="authentication_failed", message=reason)


class ChannelsStreamSink:
    """The runtime's streaming sink (``runtime.streaming.set_default_sink``)."""

    def emit(self, session_id: str, event: dict) -> None:
        gateway.publish_stream_event(session_id, event)


def recheck_users(user_pks) -> None:
    """These users' roles or permissions changed: their sockets re-check their rights now."""
    gateway.recheck([user_group(pk) for pk in user_pks])


def _user_saved(sender, instance, update_fields=None, created=False, **kwargs) -> None:
    if not instance.is_active:
        withdraw_user(instance.pk)
    elif not created and not (update_fields and set(update_fields) <= {"last_login", "password"}):
        recheck_users([instance.pk])  # staff or superuser may have changed


def _permissions_changed(sender, instance, action, model, pk_set, **kwargs) -> None:
    """``m2m_changed`` of users' permissions or groups, or of a group's permissions,
    from either side. A clear is handled before it happens (``pre_clear``), while the
    rows still say whom it concerns; the recheck itself goes out after commit."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission

    if action not in ("post_add", "post_remove", "pre_clear"):
        return
    user_model = get_user_model()
    clear = action == "pre_clear"
    if isinstance(instance, user_model):
        users = [instance.pk]
    elif model is user_model and not clear:  # permission.user_set.add(user), group.user_set.remove(user)
        users = list(pk_set or ())
    elif isinstance(instance, Group):  # its permissions changed, or group.user_set.clear()
        users = list(instance.user_set.values_list("pk", flat=True))
    elif isinstance(instance, Permission) and model is user_model:  # permission.user_set.clear()
        users = list(instance.user_set.values_list("pk", flat=True))
    elif isinstance(instance, Permission):  # permission.group_set.add/remove/clear(group)
        groups = pk_set if not clear else set(instance.group_set.values_list("pk", flat=True))
        users = list(user_model.objects.filter(groups__in=groups or ()).values_list("pk", flat=True).distinct())
    else:
        return
    recheck_users(users)


def _group_deleting(sender, instance, **kwargs) -> None:
    """A group is deleted (the console's *Groups* page): its members' rights change,
    and the cascade sends no ``m2m_changed``."""
    recheck_users(list(instance.user_set.values_list("pk", flat=True)))


def _user_deleted(sender, instance, **kwargs) -> None:
    withdraw_user(instance.pk, "user deleted")


def _token_saved(sender, instance, **kwargs) -> None:
    from runtime.tokens import token_problem

    problem = token_problem(instance)
    if problem is not None:
        withdraw_token(instance.pk, problem)


def _token_deleted(sender, instance, **kwargs) -> None:
    withdraw_token(instance.pk, "token deleted")


def install() -> None:
    """Register both producers and the signals that close sockets whose rights went
    (``RuntimeConfig.ready``): any save that leaves a user inactive (the admin's user
    page included), deleting a user, and saving or deleting a token that no longer
    works. ``runtime.tokens.api_token_revoke`` withdraws the token itself. Other saves
    of a user and changes to user or group permissions make the user's sockets check
    their rights again at once."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save

    from runtime.models import ApiToken
    from runtime.streaming import default_sink, set_default_sink
    from sessions_tree.events import add_publisher

    add_publisher(publish_tree_event)
    if not isinstance(default_sink(), ChannelsStreamSink):
        set_default_sink(ChannelsStreamSink())
    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="neta.realtime.user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="neta.realtime.user_deleted")
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid="neta.realtime.token_saved")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="neta.realtime.token_deleted")
    from django.contrib.auth.models import Group
    from django.db.models.signals import m2m_changed

    through = [user_model.user_permissions.through, user_model.groups.through, Group.permissions.through]
    for index, model in enumerate(through):
        m2m_changed.connect(_permissions_changed, sender=model, dispatch_uid=f"neta.realtime.permissions_changed.{index}")
    from django.db.models.signals import pre_delete

    pre_delete.connect(_group_deleting, sender=Group, dispatch_uid="neta.realtime.group_deleting")
