"""A socket delivers the snapshot of a session whatever it holds (stored behind the
provider's back: lone surrogates, non-finite numbers, cycles, nesting past what
orjson encodes), as the REST API does (tests/api/test_import_hostile.py)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider
from tests.support.sockets import Socket, command
from tests.support.hostile import bad_content, store_behind_back

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def _plant(owner, agent, tmp_path, provider: str, case: str) -> str:
    sid = store_behind_back(get_provider(provider), tmp_path, bad_content()[case])
    AgentSession.objects.filter(session_id=sid).update(user=owner, agent=agent.name)
    return sid


@pytest.mark.parametrize("provider", ["file", "mysql"])
@pytest.mark.parametrize("case", list(bad_content()))
async def test_the_snapshot_of_a_stored_bad_session_reaches_the_socket(owner, agent, tokens, tmp_path, fresh_layer, provider, case):
    sid = await sync_to_async(_plant, thread_sensitive=False)(owner, agent, tmp_path, provider, case)
    socket = await Socket.connect(sid, token=tokens.read_write)
    assert socket.closed_with is None
    try:
        await socket.recv_until(lambda f: f["type"] == "hello")
        reply = await command(socket, {"type": "subscribe"})
        assert reply["type"] == "subscribed", reply
        (snapshot,) = [f for f in socket.frames if f["type"] == "snapshot"]
        ids = {e.get("id") for e in snapshot["snapshot"]["entries"]}
        assert "u1" in ids  # the good entries are all there
        pong = await command(socket, {"type": "ping"})
        assert pong["type"] == "pong"  # and the socket is still open
    finally:
        await socket.close()
