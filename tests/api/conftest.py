from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from sessions_tree import events as ev
from tests.support.builders import build_tree, default_agent, owner_tokens


@pytest.fixture
def agent(db, sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    return default_agent()


@pytest.fixture
def tree(owner, agent):
    return build_tree(owner, agent)


@pytest.fixture
def tokens(owner):
    return owner_tokens(owner)


@pytest.fixture
def client_for(owner, outsider, staff, tokens):
    """An APIClient acting as one of: anonymous, owner, outsider, staff, read_only, revoked, read_write."""

    def make(actor: str) -> APIClient:
        client = APIClient()
        if actor in ("owner", "outsider", "staff"):
            client.force_login({"owner": owner, "outsider": outsider, "staff": staff}[actor])
        elif actor in ("read_only", "revoked", "read_write", "expired"):
            client.credentials(HTTP_AUTHORIZATION=f"Token {getattr(tokens, actor)}")
        return client

    return make


@pytest.fixture
def published():
    """Every tree event published (after commit) while the test runs."""
    seen: list[tuple[str, dict]] = []

    def publisher(session_id, event):
        seen.append((session_id, event))

    ev.add_publisher(publisher)
    yield seen
    ev.remove_publisher(publisher)
