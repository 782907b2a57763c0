"""Agent and model writes: the console's editors and the API call these, with the acting user (audited)."""

from __future__ import annotations

from django.db import transaction

from audit.services import changed_fields, record
from runtime.models import Agent, ModelConfig

EDITABLE = frozenset(
    f.name for f in Agent._meta.concrete_fields if f.name not in ("id", "name", "created_at", "updated_at", "access_restricted")
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


def agent_access_summary(agent: Agent) -> dict:
    return {
        "access_restricted": agent.access_restricted,
        "allowed_users": sorted(agent.allowed_users.values_list("username", flat=True)),
        "allowed_groups": sorted(agent.allowed_groups.values_list("name", flat=True)),
    }


def agent_set_access(*, agent_id: int, actor, restricted: bool, users=(), groups=()) -> Agent:
    """Who may use agent ``agent_id``: everyone (``restricted`` false), or only ``users`` and
    the members of ``groups`` (runtime/agents/access.py). One transaction with an
    ``agent.set_access`` audit row naming the users and groups before and after."""
    if not isinstance(restricted, bool):
        raise TypeError("restricted must be true or false")
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        before = agent_access_summary(agent)
        agent.access_restricted = restricted
        agent.save(update_fields=["access_restricted", "updated_at"])
        agent.allowed_users.set(list(users))
        agent.allowed_groups.set(list(groups))
        after = agent_access_summary(agent)
        old, new = changed_fields(before, after)
        if new:
            record(actor=actor, action="agent.set_access", target=agent, before=old, after=new)
    return agent


MODEL_EDITABLE = frozenset(
    f.name for f in ModelConfig._meta.concrete_fields if f.name not in ("id", "name", "created_at", "updated_at")
)


def model_config_update(*, model_id: int, actor, changes: dict) -> ModelConfig:
    """Change the fields in ``changes`` of model ``model_id``: validated by ``ModelConfig.full_clean``
    (the options against their schema, runtime/llm/options.py: ``ValidationError`` per field,
    nothing saved), saved in one transaction with a ``model.change`` audit row. The name is
    not changed here (agents and runs name their model)."""
    unknown = set(changes) - MODEL_EDITABLE
    if unknown:
        raise TypeError(f"not editable here: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        model = ModelConfig.objects.select_for_update().get(pk=model_id)
        before = {name: ModelConfig._meta.get_field(name).value_from_object(model) for name in changes}
        for name, value in changes.items():
            setattr(model, name, value)
        model.full_clean()
        old, new = changed_fields(before, {name: ModelConfig._meta.get_field(name).value_from_object(model) for name in changes})
        if new:
            model.save(update_fields=[*new, "updated_at"])
            record(actor=actor, action="model.change", target=model, before=old, after=new)
    return model
