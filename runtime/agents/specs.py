"""From a ``ModelConfig`` row to the plain ``ModelSpec`` the LLM layer takes."""

from __future__ import annotations

import os

from django.conf import settings

from runtime.agents.keys import key_refusal
from runtime.llm import ModelSpec
from runtime.llm.options import RulesFileRefused, rules_file
from runtime.models import LlmProviderKind, ModelConfig, rules_dirs


class ModelUnavailable(Exception):
    """The model cannot be used now (disabled, or its key variable is not set)."""


def model_spec(model: ModelConfig, *, for_call: bool = True) -> ModelSpec:
    """The spec a call is made with. ``for_call=False``: only to read capabilities (the
    console's warnings), so neither a disabled model nor a missing key is an error."""
    if for_call and not model.enabled:
        raise ModelUnavailable(f"model {model.name!r} is disabled")
    api_key = None
    if for_call and model.provider_kind != LlmProviderKind.SCRIPTED:
        refused = key_refusal(model)
        if refused:
            raise ModelUnavailable(refused)
        api_key = os.environ.get(model.api_key_env or "")
        if not api_key:
            raise ModelUnavailable(
                f"model {model.name!r} needs an API key in the environment variable {model.api_key_env or '(none named)'}"
            )
    options = dict(model.options or {})
    rules = options.get("rules")
    if isinstance(rules, str):
        try:
            options["rules"] = rules_file(rules, base_dir=settings.BASE_DIR, rules_dirs=rules_dirs())
        except RulesFileRefused as exc:
            if for_call:
                raise ModelUnavailable(f"model {model.name!r}: rules: {exc}") from None
            options.pop("rules")
    return ModelSpec(
        provider_kind=model.provider_kind,
        model_id=model.model_id,
        provider_name=model.provider_name or model.provider_kind,
        base_url=model.base_url or None,
        api_key=api_key,
        context_window=model.context_window,
        max_output_tokens=model.max_output_tokens,
        supports_tools=model.supports_tools,
        supports_thinking=model.supports_thinking,
        supports_images=model.supports_images,
        prices=model.prices,
        options=options,
    )
