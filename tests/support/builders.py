"""Shared builders for the API and gateway tests: agents, sessions with a tree, tokens."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.agents.bootstrap import runtime_bootstrap
from runtime.api.tokens import api_token_create, api_token_revoke
from runtime.models import Agent
from runtime.sessions.services import session_start
from sessions_tree.providers import get_provider
from tests.support.entries import assistant_message, user_message
from tests.support.rules import TEST_RULES

def default_agent() -> Agent:
    """The bootstrap's default agent on the scripted model, with the test rules."""
    from runtime.models import ModelConfig

    runtime_bootstrap()
    ModelConfig.objects.filter(name="scripted-demo").update(options={"rules": TEST_RULES})
    agent = Agent.objects.select_related("model").get(name="default")
    if agent.model.name != "scripted-demo":
        agent.model = ModelConfig.objects.get(name="scripted-demo")
        agent.save()
    return Agent.objects.select_related("model").get(pk=agent.pk)


@dataclass
class Tree:
    """A session with two branches::

        model_change → thinking → u1 → a1 → u2 → a2        (first branch)
                                         └→ u3 → a3 (leaf) (second branch, from a1)
    """

    session_id: str
    ids: dict[str, str]


def build_tree(user, agent: Agent | None = None) -> Tree:
    agent = agent or default_agent()
    meta = session_start(agent=agent, user=user)
    provider = get_provider(meta.provider)
    sid = meta.session_id
    ids = {}
    ids["u1"] = provider.append_message(sid, user_message("first question"))["id"]
    ids["a1"] = provider.append_message(sid, assistant_message("first answer"))["id"]
    ids["u2"] = provider.append_message(sid, user_message("second question"))["id"]
    ids["a2"] = provider.append_message(sid, assistant_message("second answer"))["id"]
    provider.switch_leaf(sid, ids["a1"])
    ids["u3"] = provider.append_message(sid, user_message("another way"))["id"]
    ids["a3"] = provider.append_message(sid, assistant_message("another answer"))["id"]
    return Tree(session_id=sid, ids=ids)


@dataclass
class Tokens:
    read_write: str
    read_only: str
    revoked: str
    expired: str


def owner_tokens(user) -> Tokens:
    from django.utils import timezone

    revoked = api_token_create(user=user, name="revoked")
    api_token_revoke(token=revoked.token)
    expired = api_token_create(user=user, days=1, name="expired")
    type(expired.token).objects.filter(pk=expired.token.pk).update(expires_at=timezone.now())
    return Tokens(
        read_write=api_token_create(user=user, name="rw").secret,
        read_only=api_token_create(user=user, read_only=True, name="ro").secret,
        revoked=revoked.secret,
        expired=expired.secret,
    )


def assert_error(response, status: int, code: str, field: str | None = None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if field is not None:
        assert field in body["error"]["fields"], body
    return body["error"]


def model_form(**overrides):
    """The console's model form, filled in for a scripted model (``overrides`` replace fields)."""
    data = {
        "name": "m1", "display_name": "", "provider_kind": "scripted", "provider_name": "", "model_id": "s", "base_url": "",
        "api_key_env": "", "context_window": 100000, "max_output_tokens": 8192, "supports_tools": "on",
        "price_input": 0, "price_output": 0, "price_cache_read": 0, "price_cache_write": 0, "options": "{}", "enabled": "on",
    }
    return {**data, **overrides}
