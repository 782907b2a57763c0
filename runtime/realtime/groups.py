"""Channel group names of sessions, users and tokens, and the session key that tells a deleted
and re-imported session from the one a socket opened."""

from __future__ import annotations

import hashlib
import re
import time

from runtime.realtime.sinks import bound_row
from sessions_tree.models import AgentSession
from infra.prepared import P, Prepared

GROUP_PREFIX = "neta.session."


USER_GROUP_PREFIX = "neta.user."


TOKEN_GROUP_PREFIX = "neta.token."


_GROUP_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


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

    return _SESSION_KEY.first(sid=session_id)


_SESSION_KEY = Prepared(lambda: AgentSession.objects.filter(session_id=P("sid")).order_by().values_list("pk", flat=True)[:1])


# Streaming events are published up to NETA_STREAM_RATE times a second per run: a run's
# turn names its row (``sinks.streaming_row``); other senders (a prompt's run_state) take
# the row's key from a cache a second old at most, not a query each (tree events carry
# the committing row's key).
STREAM_KEY_SECONDS = 1.0


_STREAM_KEYS_MAX = 4096


_stream_keys: dict[str, tuple[float, int | None]] = {}


def stream_session_key(session_id: str) -> int | None:
    """The row key for a streaming event: the run's own row when it is a run's turn that
    streams (``sinks.streaming_row``), else the cached lookup."""
    bound = bound_row(session_id)
    if bound is not None:
        return bound
    now = time.monotonic()
    cached = _stream_keys.get(session_id)
    if cached is not None and now - cached[0] < STREAM_KEY_SECONDS:
        return cached[1]
    key = session_key(session_id)
    if len(_stream_keys) >= _STREAM_KEYS_MAX:
        _stream_keys.clear()
    _stream_keys[session_id] = (now, key)
    return key


def forget_stream_key(session_id: str) -> None:
    """The session was deleted: its next stream key is read afresh (an import may reuse the id)."""
    _stream_keys.pop(session_id, None)
