"""Seed data: the offline demo model, the example models and the default agent."""

from __future__ import annotations

import os

from django.conf import settings

from runtime.models import (
    Agent,
    SummarizeOnSwitch,
    LlmProviderKind,
    ModelConfig,
)

DEMO_RULES = "runtime/llm/scripted_demo.yaml"


EXAMPLE_MODELS = [
    {
        "name": "claude-sonnet",
        "display_name": "Claude Sonnet 4.5",
        "provider_kind": LlmProviderKind.ANTHROPIC,
        "model_id": "claude-sonnet-4-5",
        "api_key_env": "ANTHROPIC_API_KEY",
        "context_window": 200000,
        "max_output_tokens": 16384,
        "supports_thinking": True,
        "supports_images": True,
        "price_input": 3,
        "price_output": 15,
        "price_cache_read": "0.3",
        "price_cache_write": "3.75",
    },
    {
        "name": "gpt-4-1",
        "display_name": "GPT-4.1",
        "provider_kind": LlmProviderKind.OPENAI,
        "model_id": "gpt-4.1",
        "api_key_env": "OPENAI_API_KEY",
        "context_window": 1047576,
        "max_output_tokens": 32768,
        "supports_images": True,
        "price_input": 2,
        "price_output": 8,
        "price_cache_read": "0.5",
    },
    {
        "name": "o4-mini",
        "display_name": "OpenAI o4-mini (Responses API, reasoning summaries)",
        "provider_kind": LlmProviderKind.OPENAI_RESPONSES,
        "model_id": "o4-mini",
        "api_key_env": "OPENAI_API_KEY",
        "context_window": 200000,
        "max_output_tokens": 100000,
        "supports_thinking": True,
        "supports_images": True,
        "price_input": "1.1",
        "price_output": "4.4",
        "price_cache_read": "0.275",
    },
    {
        "name": "deepseek-chat",
        "display_name": "DeepSeek (OpenAI-compatible)",
        "provider_kind": LlmProviderKind.OPENAI_COMPATIBLE,
        "provider_name": "deepseek",
        "model_id": "deepseek-chat",
        "base_url": "https://api.deepseek.com",
        "api_key_env": "DEEPSEEK_API_KEY",
        "context_window": 128000,
        "max_output_tokens": 8192,
        "price_input": "0.27",
        "price_output": "1.1",
    },
]


def runtime_bootstrap() -> list[str]:
    """Create the demo model, the example models and the default agent when missing.

    Examples for real providers are enabled only when their key variable is set.
    The default agent uses ``NETA_DEFAULT_MODEL`` if that model is usable, else the
    first example with a key, else the offline scripted demo.
    """
    created = []
    demo, made = ModelConfig.objects.get_or_create(
        name="scripted-demo",
        defaults={
            "display_name": "Scripted demo (offline)",
            "provider_kind": LlmProviderKind.SCRIPTED,
            "provider_name": "scripted",
            "model_id": "scripted-demo",
            "context_window": 128000,
            "max_output_tokens": 8192,
            "supports_thinking": True,
            "supports_images": True,
            "price_input": 1,
            "price_output": 2,
            "options": {"rules": DEMO_RULES},
        },
    )
    if made:
        created.append("model scripted-demo")
    for spec in EXAMPLE_MODELS:
        _, made = ModelConfig.objects.get_or_create(
            name=spec["name"], defaults={**spec, "enabled": bool(os.environ.get(spec["api_key_env"]))}
        )
        if made:
            created.append(f"model {spec['name']}")
    if not Agent.objects.filter(name="default").exists():
        model = _pick_default_model() or demo
        Agent.objects.create(
            name="default",
            description="The default agent: general help in its workspace.",
            model=model,
            thinking_level="medium" if model.supports_thinking else "off",
            # The chat page asks about a branch summary only when a move in the tree leaves a
            # long branch; versions, edits and regenerate never ask (docs/chat.md).
            summarize_on_switch=SummarizeOnSwitch.ASK_LONG,
            # The offline demo shows delegation ("please delegate: …"); with a real model it
            # stays off until staff enable it (docs/subagents.md).
            subagent_policy={"enabled": True, "agents": ["default"]} if model.pk == demo.pk else {},
            # Distributed on MariaDB/MySQL, sessions live in the database: every web process
            # and worker of every host reads them (docs/deploy.md, "Several hosts").
            session_provider="mysql" if _distributed() else "file",
        )
        created.append(f"agent default ({model.name})")
    return created


def _distributed() -> bool:
    return settings.NETA_TASK_BACKEND == "celery" and "mysql" in settings.DATABASES["default"].get("ENGINE", "")


def _pick_default_model() -> ModelConfig | None:
    wanted = settings.NETA_DEFAULT_MODEL
    if wanted and wanted != "auto":
        model = ModelConfig.objects.filter(name=wanted).first()
        if model is not None and model.usable:
            return model
    for spec in EXAMPLE_MODELS:
        model = ModelConfig.objects.filter(name=spec["name"]).first()
        if model is not None and model.usable:
            return model
    return None
