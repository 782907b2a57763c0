"""The data that crosses the LLM interface: what model, what request, what comes back.

`ModelSpec` is plain data built by the runtime from a `ModelConfig` row (the key is
already resolved from its environment variable). `LlmRequest` is one model call.
`StreamEvent` is Pi's `AssistantMessageEvent`, normalized.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LLM_PROVIDER_KINDS = ("anthropic", "openai", "openai-responses", "openai-compatible", "scripted")

# Pi's thinking levels, in increasing order.
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")

STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted")

EVENT_TYPES = (
    "start",
    "text_start",
    "text_delta",
    "text_end",
    "thinking_start",
    "thinking_delta",
    "thinking_end",
    "toolcall_start",
    "toolcall_delta",
    "toolcall_end",
    "done",
    "error",
)

# Pi's `api` value per provider kind (what an AssistantMessage says it was made with).
API_BY_KIND = {
    "anthropic": "anthropic-messages",
    "openai": "openai-completions",
    "openai-responses": "openai-responses",
    "openai-compatible": "openai-completions",
    "scripted": "scripted",
}


@dataclass(frozen=True)
class ModelSpec:
    provider_kind: str
    model_id: str
    provider_name: str
    base_url: str | None = None
    api_key: str | None = None
    context_window: int = 128000
    max_output_tokens: int = 8192
    supports_tools: bool = True
    supports_thinking: bool = False
    supports_images: bool = False
    prices: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)

    @property
    def api(self) -> str:
        return API_BY_KIND.get(self.provider_kind, self.provider_kind)


@dataclass
class LlmRequest:
    system_prompt: str
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    thinking_level: str = "off"
    max_tokens: int | None = None
    reasoning: bool | None = None
    # An OpenAI client's sampling parameters (``sampling.py``): each provider takes what it can.
    sampling: dict = field(default_factory=dict)

    def effective_thinking_level(self, model: ModelSpec) -> str:
        """The level the provider is asked for: "off" unless the model can think.

        `reasoning=False` forces "off"; `reasoning=True` forces thinking on, at
        `thinking_level`, or "medium" when that level is "off".
        """
        if not model.supports_thinking or self.reasoning is False:
            return "off"
        level = self.thinking_level if self.thinking_level in THINKING_LEVELS else "off"
        if self.reasoning is True and level == "off":
            return "medium"
        return level


@dataclass(slots=True)
class StreamEvent:
    type: str
    content_index: int | None = None
    delta: str = ""
    partial: dict | None = None
    message: dict | None = None
    # On an `error` event: the failure may pass (connection, timeout, 408/409/429, 5xx,
    # overloaded) and nothing was streamed, so another model may be asked instead
    # (the turn loop's failover, runtime/runs/failover.py). Never set once output began.
    retryable: bool = False


class WireProvider:
    """What `streaming.py` needs from a provider behind an HTTP API: `api` (Pi's name
    for it), `open(model, request)` → a zero-argument callable that starts the request
    (run on the pump thread), `decoder(builder)` and `describe(exc)` → a `Failure`.
    Subclasses set `decoder_class` and `describe_error`."""

    api: str
    decoder_class: type

    @staticmethod
    def describe_error(exc: BaseException):  # pragma: no cover - every subclass sets its own
        raise NotImplementedError

    def decoder(self, builder):
        return self.decoder_class(builder)

    def describe(self, exc: BaseException):
        return type(self).describe_error(exc)

    @staticmethod
    def api_key(model: ModelSpec) -> str:
        """The model's key, or the request fails before it is made."""
        from .retry import (  # a cycle: retry's failures describe a ModelSpec
            Failure,
            ProviderError,
        )

        if not model.api_key:
            raise ProviderError(Failure(f"No API key for provider: {model.provider_name}"))
        return model.api_key
