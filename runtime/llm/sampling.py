"""Sampling parameters of a model call, as OpenAI clients name them, and what each provider kind
takes of them (docs/api.md, "Parameters").

A run started through the OpenAI-compatible endpoints carries its client's parameters
(``AgentRun.sampling``); every model call of the run passes them on here, to whichever model
answers it (a fallback too). What a provider does not take is left out, as OpenAI-compatible
servers commonly do, rather than failing the call:

| parameter | anthropic | openai, openai-compatible | openai-responses | scripted |
|---|---|---|---|---|
| ``temperature`` | — | not for an ``openai`` model that thinks | not for a model that thinks | — |
| ``top_p`` | — | not for an ``openai`` model that thinks | not for a model that thinks | — |
| ``stop`` | ``stop_sequences`` | ``stop`` | — | — |
| ``seed`` | — | ``seed`` | — | — |
| ``presence_penalty``, ``frequency_penalty`` | — | not for an ``openai`` model that thinks | — | — |
| ``max_tokens`` | every kind: the call's output limit, at most the model's (``capped_max_tokens``) |

The Messages API (as the ``anthropic`` SDK Neta uses has it) takes no ``temperature`` or
``top_p``, and OpenAI's reasoning models refuse them (and the penalties) at any effort: those
are the cases left out.
"""

from __future__ import annotations

from .spec import LlmRequest, ModelSpec

SAMPLING_KEYS = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "max_tokens")


def capped_max_tokens(model_max: int, sampling: dict | None) -> int:
    """The output limit of a call: the client's ``max_tokens`` when it asks for less than the model's."""
    asked = (sampling or {}).get("max_tokens")
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        return min(model_max, asked)
    return model_max


def sampling_params(model: ModelSpec, request: LlmRequest) -> dict:
    """The provider's request parameters for ``request.sampling`` (see the module's table)."""
    asked = request.sampling or {}
    if not asked:
        return {}
    kind = model.provider_kind
    out: dict = {}

    def take(*names: str) -> None:
        for name in names:
            if asked.get(name) is not None:
                out[name] = asked[name]

    if kind == "anthropic":
        if asked.get("stop"):
            out["stop_sequences"] = list(asked["stop"])
    elif kind in ("openai", "openai-compatible"):
        if not (kind == "openai" and model.supports_thinking):
            take("temperature", "top_p", "presence_penalty", "frequency_penalty")
        take("seed")
        if asked.get("stop"):
            out["stop"] = list(asked["stop"])
    elif kind == "openai-responses":
        if not model.supports_thinking:
            take("temperature", "top_p")
    return out
