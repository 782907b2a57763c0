"""Thinking by capability: the levels a model accepts, and a requested level clamped to them.

A session asks for one of Pi's levels (`off` … `xhigh`); a model takes only some:
none but `off` without `supports_thinking`; Anthropic budget models `off`…`high`
(xhigh has no budget of its own), adaptive ones `off`, `low`, `medium`, `high` (their
efforts); the OpenAI kinds `off`…`high` (`reasoning_effort` has no xhigh); DeepSeek's
switch any level (it is on or off); the scripted model every level. A model's
`thinking_levels` option names its own list (e.g. an o-series model that refuses
`minimal`: `["off", "low", "medium", "high"]`).

`clamp_thinking(model, level)` gives the level the call is made with: the requested one
when the model accepts it, else the nearest accepted level below it, else (thinking was
asked for) the lowest accepted level above `off`, else `off`. The turn loop sends the
clamped level and says so in the run's notes instead of letting the provider refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .spec import THINKING_LEVELS, ModelSpec

ALL_LEVELS = THINKING_LEVELS
UP_TO_HIGH = ("off", "minimal", "low", "medium", "high")
ADAPTIVE_ANTHROPIC = ("off", "low", "medium", "high")


def accepted_levels(model: ModelSpec) -> tuple[str, ...]:
    """The thinking levels `model` accepts, in Pi's order (always including `off`)."""
    if not model.supports_thinking:
        return ("off",)
    declared = model.options.get("thinking_levels")
    if isinstance(declared, list) and declared:
        return tuple(level for level in THINKING_LEVELS if level == "off" or level in declared)
    kind = model.provider_kind
    if kind == "anthropic":
        from .anthropic_messages import (
            uses_adaptive_thinking,  # the wire module loads with its first model
        )

        return ADAPTIVE_ANTHROPIC if uses_adaptive_thinking(model) else UP_TO_HIGH
    if kind in ("openai", "openai-responses"):
        return UP_TO_HIGH
    if kind == "openai-compatible":
        from .openai_completions import (
            is_deepseek,  # the wire module loads with its first model
        )

        return ALL_LEVELS if is_deepseek(model) else UP_TO_HIGH
    return ALL_LEVELS


@dataclass(frozen=True)
class ThinkingClamp:
    requested: str
    level: str
    accepted: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.requested != self.level

    def describe(self, model_name: str) -> str:
        """The run note: ``thinking high → medium: model m accepts off, low, medium``."""
        if self.accepted == ("off",):
            return f"thinking {self.requested} → off: model {model_name} does not think"
        return f"thinking {self.requested} → {self.level}: model {model_name} accepts {', '.join(self.accepted)}"


def clamp_thinking(model: ModelSpec, requested: str) -> ThinkingClamp:
    requested = requested if requested in THINKING_LEVELS else "off"
    accepted = accepted_levels(model)
    if requested in accepted:
        return ThinkingClamp(requested, requested, accepted)
    rank = THINKING_LEVELS.index(requested)
    below = [level for level in accepted if level != "off" and THINKING_LEVELS.index(level) < rank]
    above = [level for level in accepted if THINKING_LEVELS.index(level) > rank]
    level = below[-1] if below else above[0] if above else "off"
    return ThinkingClamp(requested, level, accepted)
