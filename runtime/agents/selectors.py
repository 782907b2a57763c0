"""Reading agents: by name, the default one, the one a session belongs to."""

from __future__ import annotations
from django.utils.translation import gettext as _

from runtime.agents.access import usable_agents
from runtime.errors import RuntimeInputError
from runtime.models import (
    Agent,
)
from sessions_tree.models import AgentSession
from infra.prepared import P, Prepared


def agent_for_session(meta: AgentSession) -> Agent:
    agent = _AGENT_BY_NAME.first(name=meta.agent) if meta.agent else None
    if agent is None:
        agent = default_agent()
    return agent


_AGENT_BY_NAME = Prepared(lambda: Agent.objects.select_related("model").filter(name=P("name")).order_by("pk")[:1])

ANYONE = object()  # no access check (a command, the runtime itself)


def _candidates(for_user):
    qs = Agent.objects.select_related("model").filter(enabled=True)
    return qs if for_user is ANYONE else usable_agents(for_user, qs)


def default_agent(*, for_user=ANYONE) -> Agent:
    """The agent called "default", else the first enabled one; with ``for_user``, among the
    agents that user may use (runtime/agents/access.py)."""
    candidates = _candidates(for_user)
    agent = candidates.filter(name="default").first() or candidates.order_by("name").first()
    if agent is None:
        if for_user is not ANYONE and Agent.objects.filter(enabled=True).exists():
            raise RuntimeInputError("agent", _("there is no agent you may use (ask staff for access)"))
        raise RuntimeInputError("agent", _("no agent is configured (run `python manage.py neta_bootstrap`)"))
    return agent


def agent_by_name(name: str | None, *, for_user=ANYONE) -> Agent:
    """The enabled agent called ``name`` (default: the default agent). With ``for_user``, an
    agent that user may not use is answered as if it did not exist."""
    if not name:
        return default_agent(for_user=for_user)
    agent = _candidates(for_user).filter(name=name).first()
    if agent is None:
        raise RuntimeInputError("agent", _("no enabled agent named %(name)r") % {"name": name})
    return agent
