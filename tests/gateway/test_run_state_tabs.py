"""Run-state events reach every tab: a second socket on the same session,
connected once, sees a prompt's run go queued → running → completed, the abort of a run
that was still queued, and a run the reaper finds lost — without reconnecting.

The real ASGI stack, the in-memory channel layer, the inline backend and the scripted model.
"""

from __future__ import annotations

import datetime as dt

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from runtime.models import AgentRun, RunStatus
from runtime.runs.prompts import session_prompt
from runtime.runs.reaper import reap_session
from tests.support.sockets import Socket, command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def two_tabs(tree, tokens) -> tuple[Socket, Socket]:
    tabs = []
    for _ in range(2):
        socket = await Socket.connect(tree.session_id, token=tokens.read_write)
        assert (await socket.recv())["type"] == "hello"
        reply = await command(socket, {"type": "subscribe"})
        assert reply["type"] == "subscribed"
        tabs.append(socket)
    return tabs[0], tabs[1]


def run_states(socket: Socket, run_id: str) -> list[str]:
    return [f["state"] for f in socket.frames if f.get("type") == "run_state" and f.get("runId") == run_id]


async def until_state(socket: Socket, run_id: str, state: str) -> None:
    if state not in run_states(socket, run_id):
        await socket.recv_until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f.get("state") == state)


@sync_to_async(thread_sensitive=False)
def queued_run(session_id: str, user) -> str:
    return str(session_prompt(session_id=session_id, text="waits", actor=user, dispatch=False).run.run_id)


@sync_to_async(thread_sensitive=False)
def crash(run_id: str) -> None:
    """What a killed worker leaves: the run running, its heartbeat old, its process elsewhere."""
    AgentRun.objects.filter(run_id=run_id).update(
        status=RunStatus.RUNNING,
        heartbeat_at=timezone.now() - dt.timedelta(seconds=600),
        host="another-host",
        pid=4242,
        process_started=1,
        worker="gone",
    )


async def test_the_second_tab_sees_every_state_of_a_run(tree, tokens, owner, fresh_layer):
    first, second = await two_tabs(tree, tokens)
    try:
        ack = await command(first, {"type": "prompt", "text": "hello there"})
        assert ack["type"] == "ack"
        run_id = ack["result"]["runId"]
        await until_state(second, run_id, "completed")
        assert run_states(second, run_id) == ["queued", "running", "completed"]

        # A run still queued, aborted from the first tab: the second hears it at once.
        waiting = await queued_run(tree.session_id, owner)
        await until_state(second, waiting, "queued")
        reply = await command(first, {"type": "abort"})
        assert reply["type"] == "ack" and reply["result"] == {"runId": waiting, "status": "aborted"}
        await until_state(second, waiting, "aborted")
        aborted = [f for f in second.frames if f.get("type") == "run_state" and f.get("runId") == waiting][-1]
        assert aborted["error"] == "aborted by the user before it started"

        # A run whose worker died, found by the reaper: the second tab sees it lost.
        doomed = await queued_run(tree.session_id, owner)
        await crash(doomed)
        reaped = await sync_to_async(reap_session, thread_sensitive=False)(tree.session_id)
        assert [str(r.run_id) for r in reaped] == [doomed]
        await until_state(second, doomed, "lost")
        assert run_states(second, doomed)[-1] == "lost"
        assert second.closed_with is None  # one connection all along
    finally:
        await first.close()
        await second.close()
