"""The one entry point: `stream(model, request, cancel=)` and `complete(...)`.

Contract (what the turn loop relies on):
- the iterator yields `start`, block events, and ends with exactly one `done` or
  `error` event whose `message` is the final Pi AssistantMessage;
- provider and network problems never raise: they end the stream with
  `stopReason: "error"` and the provider's message in `errorMessage`;
- `cancel.set()` ends it with `stopReason: "aborted"` (errorMessage "Request was
  aborted") keeping what was streamed, within ~50 ms even if the server is silent;
- failures before any content block are retried (`retry.py`), never after; when the
  retries are spent (or not worth waiting for), the `error` event says `retryable`, so the
  caller may ask another model (failover, runtime/runs/failover.py); a failure of that kind
  after output began says `transient` (the turn loop retries the call, runtime/runs/retries.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from .anthropic_messages import AnthropicProvider
from .assistant import AssistantBuilder
from .estimate import output_chars, prompt_chars, usage_tokens
from .openai_completions import OpenAIProvider
from .openai_responses import OpenAIResponsesProvider
from .pump import OPENED, Cancelled, Pump
from .retry import ProviderError, RetryPolicy
from .scripted import ScriptedProvider
from .spec import LLM_PROVIDER_KINDS, LlmRequest, ModelSpec, StreamEvent

log = logging.getLogger("neta.llm")

_WIRE = {
    "anthropic": AnthropicProvider(),
    "openai": OpenAIProvider(),
    "openai-responses": OpenAIResponsesProvider(),
    "openai-compatible": OpenAIProvider(),
}
_SCRIPTED = ScriptedProvider()


def stream(model: ModelSpec, request: LlmRequest, *, cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
    if model.provider_kind == "scripted":
        return _SCRIPTED.stream(model, request, cancel)
    provider = _WIRE.get(model.provider_kind)
    if provider is None:
        return _failed(model, f"Unknown provider kind {model.provider_kind!r}; known: {', '.join(LLM_PROVIDER_KINDS)}")
    return _stream_wire(provider, model, request, cancel)


def complete(model: ModelSpec, request: LlmRequest, *, cancel: threading.Event | None = None) -> dict:
    """Drain `stream()` and return the final AssistantMessage."""
    final = None
    for event in stream(model, request, cancel=cancel):
        if event.type in ("done", "error"):
            final = event.message
    return final


def _failed(model: ModelSpec, message: str) -> Iterator[StreamEvent]:
    builder = AssistantBuilder(api=model.api, provider=model.provider_name, model=model.model_id, prices=model.prices)
    yield builder.fail(message)


def _stream_wire(provider, model: ModelSpec, request: LlmRequest, cancel: threading.Event | None) -> Iterator[StreamEvent]:
    b = AssistantBuilder(api=provider.api, provider=model.provider_name, model=model.model_id, prices=model.prices)
    try:
        policy = RetryPolicy.from_options(model.options)
        start = provider.open(model, request)
    except ProviderError as exc:
        yield b.fail(exc.failure.message)
        return
    except (ValueError, TypeError, KeyError) as exc:
        yield b.fail(f"Invalid request for {model.provider_kind} model {model.model_id!r}: {exc}")
        return

    attempt = 0
    while True:
        if cancel is not None and cancel.is_set():
            yield b.abort()
            return
        pump = Pump(start)
        decoder = provider.decoder(b)
        error: BaseException | None = None
        try:
            for item in pump.items(cancel):
                if item is OPENED:
                    event = b.start()
                    if event is not None:
                        yield event
                    continue
                yield from decoder.feed(item)
            close = getattr(decoder, "close_blocks", None)
            if close is not None:
                yield from close()
            stop_reason = decoder.finish()
        except Cancelled:
            pump.stop()
            yield b.abort()
            return
        except Exception as exc:  # noqa: BLE001 - every provider failure becomes a message
            error = exc
        finally:
            pump.stop()
        if error is None:
            if not b.usage_reported:
                # No usage chunk (an endpoint that ignores include_usage, a proxy that drops it):
                # estimated, never silent zeros (cost 0, compaction that never fires).
                b.estimate_usage(input=usage_tokens(prompt_chars(request)), output=usage_tokens(output_chars(b.content)))
                log.warning("%s %s: the stream reported no usage; estimated", model.provider_name, model.model_id)
            yield b.done(stop_reason)
            return

        failure = provider.describe(error)
        if failure.retryable and not b.has_output and attempt < policy.max_retries:
            delay = policy.delay(attempt, failure.retry_after)
            if delay is not None:
                attempt += 1
                log.warning(
                    "%s %s: %s; retry %d/%d in %.2fs",
                    model.provider_name,
                    model.model_id,
                    failure.message,
                    attempt,
                    policy.max_retries,
                    delay,
                )
                b.reset_before_retry()
                if cancel is not None:
                    if cancel.wait(delay):
                        yield b.abort()
                        return
                elif delay:
                    time.sleep(delay)
                continue
        if cancel is not None and cancel.is_set():
            # The failure is the abort itself (socket shut down under the read).
            yield b.abort()
            return
        event = b.fail(failure.message)
        event.retryable = failure.retryable and not b.has_output
        event.transient = failure.retryable
        yield event
        return
