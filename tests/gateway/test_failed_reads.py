"""A read that fails on the subscribe path answers the frame; it never ends the socket.

Under heavy load (tests/gateway/test_distributed.py on a machine at load ~45) a
subscribe's database read can fail; the consumer used to let the exception out,
Channels ended the consumer and Daphne closed the socket with 1011. Here the
failure is real: the runs table is renamed away (real DDL on the test database),
so the snapshot's and the run state's reads raise the database's own error.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from runtime.models import AgentRun
from tests.support.sockets import Socket, command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

TABLE = AgentRun._meta.db_table
AWAY = TABLE + "_away"


def _rename(old: str, new: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {connection.ops.quote_name(old)} RENAME TO {connection.ops.quote_name(new)}")


@pytest.fixture
def runs_table_away(tree):
    """Rename the runs table for the duration of the block (restored even when the test fails)."""
    state = {"away": False}

    def away(on: bool) -> None:
        if on != state["away"]:
            _rename(TABLE, AWAY) if on else _rename(AWAY, TABLE)
            state["away"] = on

    yield sync_to_async(away, thread_sensitive=False)
    away(False)


async def test_a_subscribe_whose_reads_fail_answers_an_error_and_the_socket_stays(tree, tokens, fresh_layer, runs_table_away):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        hello = await socket.recv()
        assert hello["type"] == "hello"
        await runs_table_away(True)

        # No revision: the snapshot's read fails -> an error for this frame, not a 1011 close.
        reply = await command(socket, {"type": "subscribe", "requestId": "s1"})
        assert reply["type"] == "error" and reply["code"] == "server_error", reply
        assert socket.closed_with is None
        assert (await command(socket, {"type": "ping", "requestId": "p1"}))["type"] == "pong"

        # With a revision: events replay, then the run state's read fails after `subscribed`.
        reply = await command(socket, {"type": "subscribe", "sinceRevision": hello["revision"], "requestId": "s2"})
        assert reply["type"] == "subscribed", reply
        assert (await command(socket, {"type": "ping", "requestId": "p2"}))["type"] == "pong"
        assert socket.closed_with is None

        # The database is back: the same frame now works on the same socket.
        await runs_table_away(False)
        reply = await command(socket, {"type": "subscribe", "requestId": "s3"})
        assert reply["type"] == "subscribed", reply
        assert any(f["type"] == "snapshot" and f["requestId"] == "s3" for f in socket.frames)
        assert socket.closed_with is None
    finally:
        await socket.close()
