"""Reading agents: by name, the default one, the one a session belongs to."""

from __future__ import annotations

from runtime.errors import RuntimeInputError
from runtime.models import (
    Agent,
)
from sessions_tree.models import AgentSession


def agent_for_session(meta: AgentSession) -> Agent:
    agent = Agent.objects.select_related("model").filter(name=meta.agent).first() if meta.agent else None
    if agent is None:
        agent = default_agent()
    return agent


def default_agent() -> Agent:
    agent = Agent.objects.select_related("model").filter(name="default", enabled=True).first()
    if agent is None:
        agent = Agent.objects.select_related("model").filter(enabled=True).first()
    if agent is None:
        raise RuntimeInputError("agent", "no agent is configured (run `python manage.py neta_bootstrap`)")
    return agent


def agent_by_name(name: str | None) -> Agent:
    """The enabled agent called ``name`` (default: the default agent)."""
    if not name:
        return default_agent()
    agent = Agent.objects.select_related("model").filter(name=name, enabled=True).first()
    if agent is None:
        raise RuntimeInputError("agent", f"no enabled agent named {name!r}")
    return agent
