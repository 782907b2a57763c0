"""Response and completion ids: stable names of a turn in the tree, made from the session id and
an entry id (no table behind them).

``resp_<token>`` names a response, ``chatcmpl-<token>`` a chat completion, ``msg_<entry id>``
an output message. The token is the session's UUID without dashes (32 hex digits) followed by
the entry id when both have the usual forms (UUIDv7, Pi's 8 hex digits), else ``x`` and the
base64url of ``[session id, entry id]`` (an imported Pi session may use any strings). A run
that ended before it wrote any answer has the id ``resp_r<run id hex>``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid

RESPONSE = "resp_"
CHAT = "chatcmpl-"
MESSAGE = "msg_"
MAX_ID = 512

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_ENTRY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def turn_token(session_id: str, entry_id: str) -> str:
    if _UUID.match(session_id) and _ENTRY.match(entry_id):
        return session_id.replace("-", "") + entry_id
    raw = json.dumps([session_id, entry_id], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return "x" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_token(token: str) -> tuple[str, str] | None:
    """(session id, entry id) of a token, or None when it is not one."""
    if token.startswith("x"):
        body = token[1:]
        try:
            value = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8", "surrogatepass"))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) and v for v in value):
            return value[0], value[1]
        return None
    head, entry_id = token[:32], token[32:]
    if not _HEX32.match(head) or not _ENTRY.match(entry_id):
        return None
    return str(uuid.UUID(head)), entry_id


def response_id(session_id: str, entry_id: str) -> str:
    return RESPONSE + turn_token(session_id, entry_id)


def run_response_id(run_id) -> str:
    return RESPONSE + "r" + uuid.UUID(str(run_id)).hex


def chat_id(session_id: str, entry_id: str) -> str:
    return CHAT + turn_token(session_id, entry_id)


def message_id(entry_id: str) -> str:
    return MESSAGE + entry_id


def parse_response_id(value) -> tuple[str, str] | str | None:
    """``(session id, entry id)`` for a turn's id, the run id (a string) for ``resp_r…``, None
    when ``value`` is no response id of this server."""
    if not isinstance(value, str) or not value.startswith(RESPONSE) or len(value) > MAX_ID:
        return None
    token = value[len(RESPONSE) :]
    if token.startswith("r") and _HEX32.match(token[1:]):
        return str(uuid.UUID(token[1:]))
    return parse_token(token)
