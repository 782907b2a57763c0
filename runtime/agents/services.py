"""Agent writes: the console's editors call these, with the acting user (audited)."""

from __future__ import annotations

from django.db import transaction

from audit.services import changed_fields, record
from runtime.models import Agent

EDITABLE = frozenset(
    f.name for f in Agent._meta.concrete_fields if f.name not in ("id", "name", "created_at", "updated_at")
)


def agent_update(*, agent_id: int, actor, changes: dict) -> Agent:
    """Change the fields in ``changes`` of agent ``agent_id``: validated by ``Agent.full_clean``
    (``ValidationError`` with the policy parsers' messages per field: nothing is saved), saved
    in one transaction with an ``agent.change`` audit row (only the fields that changed).
    The name is not changed here (sessions and runs refer to it)."""
    unknown = set(changes) - EDITABLE
    if unknown:
        raise TypeError(f"not editable here: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        agent = Agent.objects.select_for_update().select_related("model").get(pk=agent_id)
        before = {name: _value(agent, name) for name in changes}
        for name, value in changes.items():
            setattr(agent, name, value)
        agent.full_clean()
        old, new = changed_fields(before, {name: _value(agent, name) for name in changes})
        if new:
            agent.save(update_fields=[*new, "updated_at"])
            record(actor=actor, action="agent.change", target=agent, before=old, after=new)
    return agent


def _value(agent: Agent, name: str):
    field = Agent._meta.get_field(name)
    return field.value_from_object(agent)
