"""The acting user through each door: staff changing the owner's session over the REST API,
the socket and the console is recorded as staff (``SessionEvent.actor``), not as the owner."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from runtime.models import AgentRun
from sessions_tree.models import AgentSession, SessionEvent
from tests.support.sockets import Socket, api, command, rest, run_finished, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def _actors_since(session_id: str, since: int) -> set:
    meta = AgentSession.objects.get(session_id=session_id)
    return set(SessionEvent.objects.filter(session_id=meta.pk, revision__gt=since).values_list("actor_id", flat=True))


def _revision(session_id: str) -> int:
    return AgentSession.objects.get(session_id=session_id).revision


actors_since = sync_to_async(_actors_since, thread_sensitive=False)
revision = sync_to_async(_revision, thread_sensitive=False)


async def test_rest_writes_by_staff_name_staff(tree, staff, owner):
    client = await api(staff)
    before = await revision(tree.session_id)
    assert (await rest(client, "patch", f"/api/sessions/{tree.session_id}/", {"title": "Staff named it"}, format="json")).status_code == 200
    assert (await rest(client, "post", f"/api/sessions/{tree.session_id}/labels/", {"entryId": tree.ids["a1"], "label": "x"}, format="json")).status_code == 201
    assert (await rest(client, "post", f"/api/sessions/{tree.session_id}/switch-leaf/", {"entryId": tree.ids["a2"]}, format="json")).status_code == 200
    assert await actors_since(tree.session_id, before) == {staff.pk}
    owner_client = await api(owner)
    mark = await revision(tree.session_id)
    assert (await rest(owner_client, "patch", f"/api/sessions/{tree.session_id}/", {"status": "archived"}, format="json")).status_code == 200
    assert await actors_since(tree.session_id, mark) == {owner.pk}


async def test_socket_commands_by_staff_name_staff(tree, staff, fresh_layer, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(session_cookie)(staff))
    try:
        hello = await socket.recv()
        assert hello["type"] == "hello" and hello["readOnly"] is False
        assert (await command(socket, {"type": "subscribe", "sinceRevision": hello["revision"]}))["type"] == "subscribed"
        before = hello["revision"]
        assert (await command(socket, {"type": "switch_leaf", "entryId": tree.ids["a2"]}))["type"] == "ack"
        reply = await command(socket, {"type": "prompt", "text": "staff over the socket"})
        assert reply["type"] == "ack", reply
        await run_finished(socket)
        run = await sync_to_async(AgentRun.objects.get, thread_sensitive=False)(run_id=reply["result"]["runId"])
        assert run.user_id == staff.pk
        assert await actors_since(tree.session_id, before) == {staff.pk}
    finally:
        await socket.close()


def _console_rename(session_id: str, staff) -> None:
    client = Client()
    client.force_login(staff)
    meta = AgentSession.objects.get(session_id=session_id)
    form = {"title": "Console title", "agent": meta.agent, "status": meta.status, "_save": "Save"}
    response = client.post(f"/admin/sessions_tree/agentsession/{meta.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:1000]


async def test_console_writes_by_staff_name_staff(tree, staff):
    before = await revision(tree.session_id)
    await sync_to_async(_console_rename, thread_sensitive=False)(tree.session_id, staff)
    assert await actors_since(tree.session_id, before) == {staff.pk}
