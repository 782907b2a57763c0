"""LLM providers behind one streaming interface (see docs/llm.md).

    for event in stream(model_spec, LlmRequest(system_prompt, messages, tools), cancel=flag):
        ...  # event.type: start | text_* | thinking_* | toolcall_* | done | error
"""

from .cost import compute_cost
from .overflow import is_context_overflow
from .scripted import ScriptedRulesError, load_script
from .spec import PROVIDER_KINDS, THINKING_LEVELS, LlmRequest, ModelSpec, StreamEvent
from .streaming import complete, stream

__all__ = [
    "PROVIDER_KINDS",
    "THINKING_LEVELS",
    "LlmRequest",
    "ModelSpec",
    "ScriptedRulesError",
    "StreamEvent",
    "complete",
    "compute_cost",
    "is_context_overflow",
    "load_script",
    "stream",
]
