"""LLM providers behind one streaming interface (see docs/llm.md).

    for event in stream(model_spec, LlmRequest(system_prompt, messages, tools), cancel=flag):
        ...  # event.type: start | text_* | thinking_* | toolcall_* | done | error
"""

from .cost import compute_cost, empty_usage
from .overflow import is_context_overflow
from .spec import (
    LLM_PROVIDER_KINDS,
    THINKING_LEVELS,
    LlmRequest,
    ModelSpec,
    StreamEvent,
)

_LAZY = {"complete": "calls", "stream": "calls", "ScriptedRulesError": "scripted", "load_script": "scripted"}


def __getattr__(name: str):
    # Keeps start-up light: ``runtime.models`` reads ``THINKING_LEVELS`` from ``.spec``,
    # and the wire clients (httpx, ~0.1 s) load only when a model is first called.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # only for a lazy attribute's first read

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "LLM_PROVIDER_KINDS",
    "THINKING_LEVELS",
    "LlmRequest",
    "ModelSpec",
    "ScriptedRulesError",
    "StreamEvent",
    "complete",
    "compute_cost",
    "empty_usage",
    "is_context_overflow",
    "load_script",
    "stream",
]
