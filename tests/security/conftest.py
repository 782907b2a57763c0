"""What the security tests share: canary servers, planted secrets, accounts by role."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from runtime.agents import keys
from runtime.models import ModelConfig

from .canary import Canary
from .security_support import DB_URL, PROVIDER_KEY, SECRET, perms


@pytest.fixture
def canary():
    server = Canary()
    yield server
    server.close()


@pytest.fixture
def second_canary():
    server = Canary()
    yield server
    server.close()


@pytest.fixture
def planted(monkeypatch, db):
    """The server's secrets in its environment, and a model that sends the Anthropic key to
    Anthropic: what an attacker wants to reach."""
    monkeypatch.setenv("NETA_SECRET_KEY", SECRET)
    monkeypatch.setenv("NETA_DATABASE_URL", DB_URL)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)
    ModelConfig.objects.create(name="claude", provider_kind="anthropic", model_id="claude-x", api_key_env="ANTHROPIC_API_KEY")
    keys.forget()
    yield
    keys.forget()


@pytest.fixture
def account(db):
    def make(username: str, *names: str, staff: bool = True, superuser: bool = False):
        user = get_user_model().objects.create_user(username, password="pw", is_staff=staff or superuser, is_superuser=superuser)
        if names:
            user.user_permissions.set(perms(*names))
        return user

    return make
