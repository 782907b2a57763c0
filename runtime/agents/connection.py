"""Test a model's connection: one tiny streamed request through the real client.

What the console's *Test connection* shows: the time to the first event and to the end, the
first text the model sent, or the error (a missing key, a refused request, a rules file the
scripted model cannot read). No retries and a short timeout, so a dead endpoint answers fast.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from runtime.agents.specs import ModelUnavailable, model_spec
from runtime.llm import LlmRequest, stream
from runtime.models import ModelConfig

PROMPT = "Hello! This is a connection test: please answer with one short sentence."
TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    first_event_ms: float | None
    total_ms: float
    text: str
    error: str
    stop_reason: str = ""

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "firstEventMs": self.first_event_ms, "totalMs": self.total_ms, "text": self.text,
            "error": self.error, "stopReason": self.stop_reason,
        }


def model_test_connection(*, model: ModelConfig, timeout: float = TIMEOUT_SECONDS) -> ConnectionResult:
    """Stream one short answer from ``model`` (a disabled model is tested too: staff test before enabling)."""
    started = time.monotonic()
    try:
        spec = model_spec(_enabled_copy(model))
    except ModelUnavailable as exc:
        return ConnectionResult(False, None, 0.0, "", str(exc))
    options = {**spec.options, "max_retries": 0, "timeout": timeout, "connect_timeout": min(timeout, 5.0)}
    if spec.provider_kind == "scripted":
        options = {key: value for key, value in options.items() if key not in ("max_retries", "timeout", "connect_timeout")}
    spec = dataclasses.replace(spec, options=options)
    request = LlmRequest(
        system_prompt="You are being tested by an operator. Answer briefly.",
        messages=[{"role": "user", "content": [{"type": "text", "text": PROMPT}], "timestamp": int(time.time() * 1000)}],
        max_tokens=32,
    )
    first = None
    text = []
    try:
        for event in stream(spec, request):
            if first is None:
                first = (time.monotonic() - started) * 1000
            if event.type == "text_delta":
                text.append(event.delta)
            elif event.type in ("done", "error"):
                message = event.message or {}
                total = (time.monotonic() - started) * 1000
                error = message.get("errorMessage") or ""
                ok = event.type == "done" and not error
                return ConnectionResult(ok, round(first, 1), round(total, 1), "".join(text)[:500], error, message.get("stopReason") or "")
    except Exception as exc:  # noqa: BLE001 - whatever the client raised is the answer the operator needs
        return ConnectionResult(False, first, round((time.monotonic() - started) * 1000, 1), "".join(text)[:500], f"{type(exc).__name__}: {exc}")
    return ConnectionResult(False, first, round((time.monotonic() - started) * 1000, 1), "".join(text)[:500], "the stream ended without a final message")


def _enabled_copy(model: ModelConfig) -> ModelConfig:
    copy = ModelConfig(**{f.attname: getattr(model, f.attname) for f in ModelConfig._meta.concrete_fields})
    copy.enabled = True
    return copy
