"""Agent and model writes: the console's editors and the API call these, with the acting user (audited)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from audit.services import changed_fields, record
from runtime.models import CREDENTIAL_FIELDS, DIRECT_KEYS_PERMISSION, Agent, ModelConfig

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
MODEL_CREATABLE = MODEL_EDITABLE | {"name"}


def may_direct_keys(actor) -> bool:
    """May ``actor`` choose where a model's key goes (its provider kind, base URL, key variable)?"""
    return bool(actor is not None and actor.has_perm(DIRECT_KEYS_PERMISSION))


def _check_credentials(actor, model: ModelConfig, changed: set[str]) -> None:
    """Directing a key — creating a model with a key variable or a base URL, or changing the provider
    kind, base URL or key variable of one — needs the ``direct_model_keys`` permission; and an
    endpoint chosen by anyone but a superuser must pass the web tools' guard (no loopback, private
    or metadata address unless ``NETA_WEB_FETCH_ALLOW`` lists the host)."""
    if not changed:
        return
    _check_may_direct(actor, changed)
    if "base_url" in changed and model.base_url and not actor.is_superuser:
        from toolcatalog import web_guard  # resolves the host: loaded with the first endpoint checked

        try:
            web_guard.check_url(model.base_url, web_guard.policy_from_settings())
        except (web_guard.WebRefused, web_guard.WebFetchError) as exc:
            raise ValidationError({"base_url": f"{exc} (an endpoint set without superuser rights must be a public address or listed in NETA_WEB_FETCH_ALLOW)"}) from None


def _check_may_direct(actor, changed: set[str]) -> None:
    if changed and not may_direct_keys(actor):
        raise PermissionDenied(
            f"changing {', '.join(sorted(changed))} directs an API key: it needs the 'Can direct API keys' permission"
        )


def model_write_problem(actor, model: ModelConfig, changed: set[str]) -> None:
    """The credentials rule for a form about to save ``model`` (its fields ``changed``): raises
    ``ValidationError`` (a missing permission as a form error) — what the services would refuse."""
    credentials = set(changed) & set(CREDENTIAL_FIELDS)
    if model.pk is None:
        credentials = {name for name in ("base_url", "api_key_env") if getattr(model, name)}
    elif credentials == {"provider_kind"} and not model.api_key_env and not model.base_url:
        credentials = set()
    try:
        _check_credentials(actor, model, credentials)
    except PermissionDenied as exc:
        raise ValidationError(str(exc)) from None


def _credential_changes(model: ModelConfig, before: dict) -> set[str]:
    changed = {name for name in CREDENTIAL_FIELDS if name in before and before[name] != getattr(model, name)}
    if changed == {"provider_kind"} and not model.api_key_env and not model.base_url:
        return set()  # a model without key or endpoint directs nothing (scripted ↔ remote needs a key, refused by clean)
    return changed


def model_config_create(*, actor, fields: dict) -> ModelConfig:
    """Create a model from ``fields``: validated by ``ModelConfig.full_clean`` (``ValidationError``
    per field, nothing saved), the credentials rule (:func:`_check_credentials`: ``PermissionDenied``),
    saved with a ``model.create`` audit row in one transaction."""
    unknown = set(fields) - MODEL_CREATABLE
    if unknown:
        raise TypeError(f"not settable here: {', '.join(sorted(unknown))}")
    model = ModelConfig(**fields)
    blank = ModelConfig()
    changed = {name for name in ("base_url", "api_key_env") if getattr(model, name) != getattr(blank, name)}
    _check_may_direct(actor, changed)  # before validation: nothing is said about a field one may not set
    with transaction.atomic():
        model.full_clean()
        _check_credentials(actor, model, changed)
        model.save()
        after = {name: ModelConfig._meta.get_field(name).value_from_object(model) for name in sorted(MODEL_CREATABLE)}
        record(actor=actor, action="model.create", target=model, after=after)
    return model


def model_config_update(*, model_id: int, actor, changes: dict) -> ModelConfig:
    """Change the fields in ``changes`` of model ``model_id``: validated by ``ModelConfig.full_clean``
    (the options against their schema, runtime/llm/options.py: ``ValidationError`` per field,
    nothing saved), the credentials rule (:func:`_check_credentials`: ``PermissionDenied``), saved
    in one transaction with a ``model.change`` audit row. The name is not changed here (agents and
    runs name their model)."""
    unknown = set(changes) - MODEL_EDITABLE
    if unknown:
        raise TypeError(f"not editable here: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        model = ModelConfig.objects.select_for_update().get(pk=model_id)
        before = {name: ModelConfig._meta.get_field(name).value_from_object(model) for name in changes}
        for name, value in changes.items():
            setattr(model, name, value)
        credentials = _credential_changes(model, before)
        _check_may_direct(actor, credentials)  # before validation: nothing is said about a field one may not set
        model.full_clean()
        _check_credentials(actor, model, credentials)
        old, new = changed_fields(before, {name: ModelConfig._meta.get_field(name).value_from_object(model) for name in changes})
        if new:
            model.save(update_fields=[*new, "updated_at"])
            record(actor=actor, action="model.change", target=model, before=old, after=new)
    return model
