"""Rights on an open socket: they are checked on every command and heartbeat, and
withdrawing them closes the socket at once.

* revoking a token or deactivating a user (any save, the admin's user page
  included) closes their sockets with 4401 — through the in-memory layer and
  through the real Redis layer;
* a session's socket is bound to its row: deleting the session closes it (4404,
  after an ``error`` ``session_not_found``), and a session imported later under the
  same id is another session — the first socket neither sees nor writes it, even
  when the deletion's doorbell was lost;
* a withdrawal that sends no message (a raw UPDATE) is still caught by the next
  command or heartbeat.

Cross-process withdrawal under a real Daphne: test_daphne.py.
"""

from __future__ import annotations

import asyncio
import os

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.utils import timezone

from runtime.api.tokens import api_token_create, api_token_revoke
from runtime.models import AgentRun, ApiToken
from runtime.realtime.groups import group_name
from runtime.realtime.messages import stream_messages, tree_message
from runtime.realtime.publisher import publish_tree_event
from sessions_tree import events as ev
from sessions_tree.models import AgentSession
from tests.support.roles import role_user
from tests.support.services import REDIS_URL, redis_available, require
from tests.support.sockets import Socket, api, command, rest, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

CLOSED = "__closed__"


@pytest_asyncio.fixture(params=["memory", "redis"])
async def layer(request, settings):
    """The channel layer the sockets and the publishers share: in-memory, or real Redis."""
    from channels.layers import get_channel_layer

    if request.param == "memory":
        layer = get_channel_layer()
        await layer.flush()
        yield request.param
        await layer.flush()
        return
    require(redis_available(), "Redis is not reachable")
    import redis

    prefix = f"neta_test_rights_{os.getpid()}_{os.urandom(3).hex()}"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "runtime.realtime.redis_layer.RedisFanoutLayer",  # the deployed one (neta/settings.py)
            "CONFIG": {"hosts": [REDIS_URL], "prefix": prefix, "capacity": 500},
        }
    }
    assert type(get_channel_layer()).__name__ == "RedisFanoutLayer"
    yield request.param
    # The publisher's loop shares the layer, so its keys are removed directly, not with flush().
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


async def closed(socket: Socket, timeout: float = 20) -> list[dict]:
    """Frames up to the close (which must come)."""
    return await socket.recv_until(lambda f: f["type"] == CLOSED, timeout)


async def opened(socket: Socket) -> dict:
    hello = await socket.recv()
    assert hello["type"] == "hello", hello
    reply = await command(socket, {"type": "subscribe", "sinceRevision": hello["revision"]})
    assert reply["type"] == "subscribed"
    return hello


def _new_token(user) -> tuple[ApiToken, str]:
    issued = api_token_create(user=user, name="socket")
    return issued.token, issued.secret


def _runs() -> int:
    return AgentRun.objects.count()


# --------------------------------------------------------------------------- revoked, deactivated (doorbell)


async def test_revoking_a_token_closes_its_sockets_at_once(layer, tree, owner, cookie_for, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600  # not the heartbeat: the revocation itself
    token, secret = await sync_to_async(_new_token)(owner)
    by_token = await Socket.connect(tree.session_id, token=secret)
    by_cookie = await Socket.connect(tree.session_id, cookie=await sync_to_async(cookie_for)("owner"))
    try:
        await opened(by_token)
        await opened(by_cookie)
        await sync_to_async(api_token_revoke)(token=token)
        frames = await closed(by_token)
        assert frames[-1]["code"] == 4401
        assert frames[-2]["type"] == "error" and frames[-2]["code"] == "authentication_failed"
        assert "revoked" in frames[-2]["message"]
        # The same user's cookie socket is not the token's: it stays.
        assert (await command(by_cookie, {"type": "ping"}))["type"] == "pong"
    finally:
        await by_token.close()
        await by_cookie.close()


async def test_the_admin_revoke_action_closes_the_tokens_sockets(layer, tree, owner, staff, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    token, secret = await sync_to_async(_new_token)(owner)
    socket = await Socket.connect(tree.session_id, token=secret)
    try:
        await opened(socket)

        def revoke_in_admin():
            from django.test import Client

            client = Client()
            client.force_login(staff)
            response = client.post(
                "/admin/runtime/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}, follow=True
            )
            assert response.status_code == 200

        await sync_to_async(revoke_in_admin)()
        assert (await closed(socket))[-1]["code"] == 4401
    finally:
        await socket.close()


@pytest.mark.parametrize("how", ["save", "admin"])
async def test_deactivating_a_user_closes_all_their_sockets_at_once(how, layer, tree, owner, staff, cookie_for, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    _, secret = await sync_to_async(_new_token)(owner)
    sockets = [
        await Socket.connect(tree.session_id, token=secret),
        await Socket.connect(tree.session_id, cookie=await sync_to_async(cookie_for)("owner")),
    ]
    try:
        for socket in sockets:
            await opened(socket)

        def deactivate():
            if how == "save":
                owner.is_active = False
                owner.save()
                return
            from django.test import Client

            client = Client()
            client.force_login(staff)
            form = {
                "username": owner.username,
                "first_name": "",
                "last_name": "",
                "email": "",
                "is_staff": "",
                "date_joined_0": "2026-01-01",
                "date_joined_1": "00:00:00",
                "initial-date_joined_0": "2026-01-01",
                "initial-date_joined_1": "00:00:00",
                # is_active left out: the checkbox is unticked
            }
            response = client.post(f"/admin/auth/user/{owner.pk}/change/", form)
            assert response.status_code == 302, response.content[:2000]

        await sync_to_async(deactivate)()
        for socket in sockets:
            frames = await closed(socket)
            assert frames[-1]["code"] == 4401
            assert frames[-2]["code"] == "authentication_failed"
        assert not await sync_to_async(lambda: type(owner).objects.get(pk=owner.pk).is_active)()
    finally:
        for socket in sockets:
            await socket.close()


# --------------------------------------------------------------------------- rechecked without a doorbell


def _withdraw_silently(how: str, owner, token: ApiToken) -> None:
    """Take the rights away with a raw UPDATE: no signal, no message to any socket."""
    if how == "revoked":
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    elif how == "expired":
        ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now())
    elif how == "deactivated":
        type(owner).objects.filter(pk=owner.pk).update(is_active=False)
    elif how == "token_deleted":
        ApiToken.objects.filter(pk=token.pk)._raw_delete(ApiToken.objects.db)


@pytest.mark.parametrize("how", ["revoked", "expired", "deactivated", "token_deleted"])
@pytest.mark.parametrize("frame", ["prompt", "switch_leaf", "subscribe", "ping"])
async def test_every_command_rechecks_the_callers_rights(how, frame, tree, owner, fresh_layer, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    token, secret = await sync_to_async(_new_token)(owner)
    socket = await Socket.connect(tree.session_id, token=secret)
    try:
        await opened(socket)
        revision = await sync_to_async(lambda: AgentSession.objects.get(session_id=tree.session_id).revision)()
        await sync_to_async(_withdraw_silently)(how, owner, token)
        body = {
            "prompt": {"type": "prompt", "text": "after the revocation"},
            "switch_leaf": {"type": "switch_leaf", "entryId": tree.ids["a1"]},
            "subscribe": {"type": "subscribe"},
            "ping": {"type": "ping"},
        }[frame]
        await socket.send({**body, "requestId": "late"})
        frames = await closed(socket)
        assert frames[-1]["code"] == 4401
        assert frames[-2] == {"type": "error", "code": "authentication_failed", "message": frames[-2]["message"], "requestId": "late"}
        assert not any(f["type"] in ("ack", "snapshot", "pong") for f in frames)
        assert await sync_to_async(_runs)() == 0
        assert await sync_to_async(lambda: AgentSession.objects.get(session_id=tree.session_id).revision)() == revision
    finally:
        await socket.close()


async def test_the_heartbeat_rechecks_the_callers_rights(tree, owner, fresh_layer, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 1
    token, secret = await sync_to_async(_new_token)(owner)
    socket = await Socket.connect(tree.session_id, token=secret)
    try:
        await opened(socket)
        await sync_to_async(_withdraw_silently)("revoked", owner, token)
        frames = await closed(socket)  # no command sent: the heartbeat found out
        assert frames[-1]["code"] == 4401 and frames[-2]["code"] == "authentication_failed"
    finally:
        await socket.close()


async def test_a_token_revoked_before_the_socket_joined_its_groups_is_refused(tree, owner, fresh_layer):
    token, secret = await sync_to_async(_new_token)(owner)
    await sync_to_async(api_token_revoke)(token=token)
    socket = await Socket.connect(tree.session_id, token=secret)
    assert (await socket.recv()) == {"type": CLOSED, "code": 4401}
    await socket.close()


async def test_staff_losing_a_permission_lose_what_it_allowed_at_the_next_command(tree, fresh_layer, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    user = await sync_to_async(role_user)("change_staff")
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(session_cookie)(user))
    try:
        hello = await opened(socket)
        assert hello["readOnly"] is False
        assert (await command(socket, {"type": "switch_leaf", "entryId": tree.ids["a1"]}))["type"] == "ack"

        def only_view():
            user.user_permissions.set(Permission.objects.filter(codename="view_agentsession"))

        await sync_to_async(only_view)()
        reply = await command(socket, {"type": "switch_leaf", "entryId": tree.ids["a3"]})
        assert reply["type"] == "error" and reply["code"] == "permission_denied"
        assert (await command(socket, {"type": "ping"}))["type"] == "pong"  # may still read

        await sync_to_async(lambda: user.user_permissions.clear())()
        await socket.send({"type": "ping", "requestId": "p"})
        frames = await closed(socket)
        assert frames[-1]["code"] == 4404 and frames[-2]["code"] == "session_not_found"
    finally:
        await socket.close()


@pytest.mark.parametrize("change", ["permission_removed", "group_permission_removed", "group_left", "group_deleted", "group_member_removed_from_its_side", "permission_cleared_from_its_side", "superuser_demoted", "staff_demoted"])
async def test_a_role_change_takes_effect_on_open_sockets_at_once(change, layer, tree, settings):
    """No command, no heartbeat: the change itself makes the user's sockets check again."""
    from django.contrib.auth.models import Group

    settings.NETA_WS_HEARTBEAT_SECONDS = 600

    def make_user():
        if change == "superuser_demoted":
            return role_user("superuser")
        user = role_user("plain_staff" if change.startswith("group") else "view_staff")
        if change.startswith("group"):
            group = Group.objects.create(name="session viewers")
            group.permissions.set(Permission.objects.filter(codename="view_agentsession"))
            user.groups.add(group)
        return user

    user = await sync_to_async(make_user)()
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(session_cookie)(user))
    try:
        await opened(socket)

        def take_away():
            if change == "permission_removed":
                user.user_permissions.clear()
            elif change == "group_permission_removed":
                Group.objects.get(name="session viewers").permissions.clear()
            elif change == "group_left":
                user.groups.clear()
            elif change == "group_deleted":  # the console's group delete: no m2m_changed
                Group.objects.get(name="session viewers").delete()
            elif change == "group_member_removed_from_its_side":
                Group.objects.get(name="session viewers").user_set.remove(user)
            elif change == "permission_cleared_from_its_side":
                Permission.objects.get(codename="view_agentsession").user_set.clear()
            elif change == "superuser_demoted":
                user.is_superuser = False
                user.save()
            else:
                user.is_staff = False
                user.save()

        await sync_to_async(take_away)()
        frames = await closed(socket)
        assert frames[-1]["code"] == 4404 and frames[-2]["code"] == "session_not_found"
    finally:
        await socket.close()


# --------------------------------------------------------------------------- bound to the session row


async def test_deleting_a_session_closes_its_sockets_at_once(layer, tree, owner, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 600  # not the heartbeat: the deletion's notice
    _, secret = await sync_to_async(_new_token)(owner)
    watchers = [await Socket.connect(tree.session_id, token=secret) for _ in range(2)]
    try:
        for socket in watchers:
            await opened(socket)
        response = await rest(await api(owner), "delete", f"/api/sessions/{tree.session_id}/")
        assert response.status_code == 204
        for socket in watchers:
            frames = await closed(socket)
            assert frames[-1]["code"] == 4404
            assert frames[-2]["type"] == "error" and frames[-2]["code"] == "session_not_found"
    finally:
        for socket in watchers:
            await socket.close()


async def _run_done(client, run_id: str) -> dict:
    for _ in range(600):
        run = (await rest(client, "get", f"/api/runs/{run_id}/")).json()
        if run["status"] in ("completed", "aborted", "failed", "lost"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


@pytest.mark.parametrize("notice", ["delivered", "lost"])
async def test_a_socket_never_follows_its_session_id_into_another_users_session(notice, layer, tree, owner, outsider, settings):
    """Alice watches X and deletes it; Bob imports a file whose header id is X and
    prompts. Alice's socket gets none of Bob's events and cannot write into Bob's
    session — also when the deletion's doorbell never rang."""
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    alice, bob = await api(owner), await api(outsider)
    exported = b"".join((await rest(alice, "get", f"/api/sessions/{tree.session_id}/export/")).streaming_content)
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(session_cookie)(owner))
    try:
        await opened(socket)
        subscribed_at = len(socket.frames)
        if notice == "lost":
            ev.remove_publisher(publish_tree_event)
        try:
            assert (await rest(alice, "delete", f"/api/sessions/{tree.session_id}/")).status_code == 204
        finally:
            ev.add_publisher(publish_tree_event)
        if notice == "delivered":
            frames = await closed(socket)
            assert frames[-1]["code"] == 4404
            return

        import io

        upload = io.BytesIO(exported)
        upload.name = "x.jsonl"
        response = await rest(bob, "post", "/api/sessions/import/", {"file": upload}, format="multipart")
        assert response.status_code == 201, response.content
        bobs_id = response.json()["sessionId"]
        bobs = await sync_to_async(lambda: AgentSession.objects.get(session_id=bobs_id))()
        assert bobs.user_id == outsider.pk
        prompt = await rest(bob, "post", f"/api/sessions/{bobs_id}/prompt/", {"text": "bob's secret"})
        assert prompt.status_code == 202, prompt.content
        await _run_done(bob, prompt.json()["run"]["runId"])
        bobs_revision = await sync_to_async(lambda: AgentSession.objects.get(pk=bobs.pk).revision)()

        # Alice's socket: her prompt is refused and the socket closes (the row it was opened on is gone).
        await socket.send({"type": "prompt", "text": "alice's prompt", "requestId": "a"})
        frames = await closed(socket)
        assert frames[-1]["code"] == 4404
        assert frames[-2]["code"] == "session_not_found"
        received = socket.frames[subscribed_at:]
        assert not [f for f in received if f["type"] not in ("error", "heartbeat")], "Bob's events reached Alice's socket"
        assert await sync_to_async(lambda: AgentSession.objects.get(pk=bobs.pk).revision)() == bobs_revision
        assert not await sync_to_async(lambda: AgentRun.objects.filter(user=owner).exists())()
    finally:
        await socket.close()


async def test_events_of_another_row_under_the_same_id_are_not_forwarded(tree, owner, fresh_layer, settings):
    """The consumer forwards a group message only when it names the row it was opened on."""
    settings.NETA_WS_HEARTBEAT_SECONDS = 600
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(session_cookie)(owner))
    try:
        hello = await opened(socket)
        from channels.layers import get_channel_layer

        row = await sync_to_async(lambda: AgentSession.objects.get(session_id=tree.session_id).pk)()
        group = group_name(tree.session_id)
        stranger = {"type": "assistant_stream_delta", "sessionId": tree.session_id, "delta": "not yours"}
        ours = {"type": "assistant_stream_delta", "sessionId": tree.session_id, "delta": "yours"}
        for message in (
            *stream_messages(tree.session_id, stranger, key=row + 1000),
            *stream_messages(tree.session_id, stranger, key=None),
            tree_message(tree.session_id, {"type": "session_leaf_changed", "revision": hello["revision"] + 1, "leafId": None}, key=row + 1000),
            *stream_messages(tree.session_id, ours, key=row),
        ):
            await get_channel_layer().group_send(group, message)
        frames = await socket.recv_until(lambda f: f.get("delta") == "yours")
        assert [f.get("delta") for f in frames] == ["yours"]
    finally:
        await socket.close()



async def test_a_token_sockets_rights_check_reads_the_token_and_its_user_in_one_query(tree, owner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runtime.gateway.consumers import Binding, _check

    def check() -> list[str]:
        token, _ = _new_token(owner)
        row = AgentSession.objects.get(session_id=tree.session_id)
        with CaptureQueriesContext(connection) as queries:
            user, meta = _check(Binding(tree.session_id, row.pk, owner.pk, token.pk))
        assert user.pk == owner.pk and meta.pk == row.pk
        return [q["sql"] for q in queries]

    sql = await sync_to_async(check)()
    users = type(owner)._meta.db_table
    # Every heartbeat makes this check: the user comes with the token, not in a query of its own.
    assert [s for s in sql if users in s] == [s for s in sql if ApiToken._meta.db_table in s], sql
    assert len([s for s in sql if users in s]) == 1, sql
