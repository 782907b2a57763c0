"""The socket enforces who may use an agent: a user the session's agent is not
open to (any more) can still watch their session but a prompt is refused, permission_denied."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.agents.services import agent_set_access
from runtime.models import AgentRun
from tests.support.sockets import Socket, command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def test_a_prompt_to_an_agent_the_user_may_not_use_is_refused(tree, agent, staff, cookie_for, fresh_layer):
    await sync_to_async(agent_set_access)(agent_id=agent.pk, actor=staff, restricted=True)
    socket = await Socket.connect(tree.session_id, cookie=await sync_to_async(cookie_for)("owner"))
    try:
        reply = await command(socket, {"type": "prompt", "text": "hello"})
        assert reply["type"] == "error" and reply["code"] == "permission_denied", reply
        assert "may not use the agent 'default'" in reply["message"]
        assert not await sync_to_async(AgentRun.objects.filter(session_id=tree.session_id).exists)()
    finally:
        await socket.close()
