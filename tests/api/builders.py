"""Shared builders for the API and gateway tests: agents, sessions with a tree, tokens."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.agents.bootstrap import runtime_bootstrap
from runtime.api.tokens import api_token_create, api_token_revoke
from runtime.models import Agent
from runtime.sessions.services import session_start
from sessions_tree.providers import get_provider
from tests.sessions_tree.conftest import assistant_message, user_message

SLOW_TEXT = " ".join(f"word{i:03d}" for i in range(120))  # 959 characters

# The scripted model's rules for these tests: instant replies, one slow stream
# (for abort and dropped sockets), one tool round, and short summaries.
TEST_RULES = {
    "version": 1,
    "chunk_size": 8,
    "delay_ms": 0,
    "rules": [
        {"match": {"system": "context summarization assistant"}, "reply": "## Goal\nThe branch, summarized."},
        {"match": {"contains": "slowly"}, "reply": {"delay_ms": 4, "chunk_size": 3, "steps": [{"text": SLOW_TEXT}]}},
        {
            "match": {"contains": "use a tool"},
            "replies": [[{"text": "Looking around."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], "Done looking."],
        },
    ],
    "default": {"reply": "You said: {{user}}"},
}


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
