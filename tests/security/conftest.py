"""What the security tests share: canary servers, planted secrets, accounts by role."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from runtime.agents import keys
from runtime.models import ModelConfig

from .canary import Canary

SECRET = "canary-secret-key-7f3a"  # what NETA_SECRET_KEY holds in the environment
DB_URL = "mysql://root:canary-db-pw-7f3a@127.0.0.1/x"
PROVIDER_KEY = "canary-anthropic-key-7f3a"  # the Anthropic key the model 'claude' sends
PLANTED = (SECRET, "canary-db-pw-7f3a", PROVIDER_KEY)


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


def perms(*names: str) -> list[Permission]:
    """Permissions by ``app.codename``; ``app.model:*`` is the model's add/change/delete/view."""
    found = []
    for name in names:
        app, codename = name.split(".", 1)
        if codename.endswith(":*"):
            model = codename[:-2]
            found += list(Permission.objects.filter(content_type__app_label=app, codename__in=[f"{a}_{model}" for a in ("add", "change", "delete", "view")]))
        else:
            found.append(Permission.objects.get(content_type__app_label=app, codename=codename))
    return found


@pytest.fixture
def account(db):
    def make(username: str, *names: str, staff: bool = True, superuser: bool = False):
        user = get_user_model().objects.create_user(username, password="pw", is_staff=staff or superuser, is_superuser=superuser)
        if names:
            user.user_permissions.set(perms(*names))
        return user

    return make


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client
