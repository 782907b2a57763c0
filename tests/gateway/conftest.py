"""Websocket tests: the real ASGI stack (origin check, cookie/token auth, router,
consumer), the in-memory channel layer, the inline backend and the scripted model."""

from __future__ import annotations

import pytest
import pytest_asyncio
from channels.layers import get_channel_layer

from tests.support.builders import build_tree, default_agent, owner_tokens
from tests.support.sockets import session_cookie


@pytest.fixture
def agent(transactional_db, sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    settings.NETA_TASK_BACKEND = "inline"
    return default_agent()


@pytest.fixture
def tree(owner, agent):
    return build_tree(owner, agent)


@pytest.fixture
def tokens(owner):
    return owner_tokens(owner)


@pytest_asyncio.fixture
async def fresh_layer():
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()


@pytest.fixture
def cookie_for(owner, outsider, staff):
    made = {}

    def make(actor: str) -> bytes:
        if actor not in made:
            made[actor] = session_cookie({"owner": owner, "outsider": outsider, "staff": staff}[actor])
        return made[actor]

    return make
