"""Who may use an agent: every user, unless the agent is restricted to named users and groups.

One rule for the API (agent lists, creating a session, prompting), the socket (its prompts go
through the same service) and the chat page. A superuser may use every enabled agent; staff
powers over other users' sessions (reading, renaming…) are the session access rule's, not
this one. A disabled agent is usable by nobody.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Q

from runtime.models import Agent


def _person(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None


def agent_usable_by(agent: Agent, user) -> bool:
    """Whether ``user`` may start sessions with ``agent`` and prompt it (None: a command)."""
    if not agent.enabled:
        return False
    if user is None or not agent.access_restricted or getattr(user, "is_superuser", False):
        return True
    if not _person(user):
        return False
    if agent.allowed_users.filter(pk=user.pk).exists():
        return True
    return agent.allowed_groups.filter(pk__in=user.groups.values("pk")).exists()


def usable_agents(user, queryset=None):
    """The enabled agents ``user`` may use (a queryset; ``queryset`` narrows the start)."""
    qs = (queryset if queryset is not None else Agent.objects.all()).filter(enabled=True)
    if user is None or getattr(user, "is_superuser", False):
        return qs
    if not _person(user):
        return qs.none()
    allowed = Q(access_restricted=False) | Q(allowed_users=user) | Q(allowed_groups__in=user.groups.values("pk"))
    return qs.filter(pk__in=Agent.objects.filter(allowed).values("pk"))


def check_agent_use(agent: Agent, user) -> None:
    """``PermissionDenied`` (403) unless ``user`` may use ``agent``."""
    if not agent_usable_by(agent, user):
        raise PermissionDenied(f"you may not use the agent {agent.name!r}")
