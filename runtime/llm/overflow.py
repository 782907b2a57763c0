"""Pi's context-overflow rule (`isContextOverflow`, pi-session-format.md §10.1)."""

from __future__ import annotations

import re

# Error texts providers return when the input exceeds the context window (facts from
# Pi 0.73.1; the provider each one comes from is named).
OVERFLOW_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",  # Anthropic
        r"request_too_large",  # Anthropic, HTTP 413
        r"input is too long for requested model",  # Amazon Bedrock
        r"exceeds the context window",  # OpenAI
        r"input token count.*exceeds the maximum",  # Google
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"maximum context length is \d+ tokens",  # OpenRouter, DeepSeek, vLLM
        r"exceeds the limit of \d+",  # GitHub Copilot
        r"exceeds the available context size",  # llama.cpp
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi
        r"too large for model with \d+ maximum context length",  # Mistral
        r"model_context_window_exceeded",  # z.ai / Anthropic stop reason surfaced as error
        r"prompt too long; exceeded (?:max )?context length",  # Ollama
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",  # Cerebras
    )
)

# Texts that look like overflow but are throttling.
NON_OVERFLOW_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (r"^(Throttling error|Service unavailable):", r"rate limit", r"too many requests")
)


def _tokens(usage: dict, key: str) -> float:
    value = usage.get(key) or 0
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def is_context_overflow(message: dict, context_window: int) -> bool:
    """True when an assistant message shows the context window was exceeded.

    1. `stopReason: "error"` whose `errorMessage` matches a provider overflow pattern
       (and no throttling pattern);
    2. `stopReason: "stop"` with `input + cacheRead > context_window` (silent overflow);
    3. `stopReason: "length"`, `output == 0`, `input + cacheRead >= 0.99 * context_window`.
    Cases 2 and 3 need a positive `context_window`.
    """
    stop = message.get("stopReason")
    error = message.get("errorMessage")
    if stop == "error" and isinstance(error, str) and error:
        if not any(p.search(error) for p in NON_OVERFLOW_PATTERNS) and any(p.search(error) for p in OVERFLOW_PATTERNS):
            return True
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
    if context_window and stop == "stop":
        if _tokens(usage, "input") + _tokens(usage, "cacheRead") > context_window:
            return True
    if context_window and stop == "length" and _tokens(usage, "output") == 0:
        if _tokens(usage, "input") + _tokens(usage, "cacheRead") >= context_window * 0.99:
            return True
    return False
