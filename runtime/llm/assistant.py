"""Building Pi's AssistantMessage while it streams, and the events that describe it.

Every provider drives one `AssistantBuilder`: it owns the message dict (Pi's key
order), appends content blocks, and returns the `StreamEvent` for each step. The
message is live: `event.partial` is the same dict for every event of a stream, so
a consumer that keeps a snapshot copies it. Scratch state (streamed tool-call JSON)
lives beside the message, never inside it, so the partial always has Pi's shape.
"""

from __future__ import annotations

import time

from .cost import empty_usage, set_usage
from .partial_json import PartialJson, parse_arguments
from .spec import StreamEvent

ABORTED_MESSAGE = "Request was aborted"


def now_ms() -> int:
    return int(time.time() * 1000)


class AssistantBuilder:
    __slots__ = ("message", "content", "prices", "started", "finished", "usage_reported", "_json", "_open")

    def __init__(self, *, api: str, provider: str, model: str, prices: dict | None, timestamp: int | None = None):
        self.content: list[dict] = []
        self.message: dict = {
            "role": "assistant",
            "content": self.content,
            "api": api,
            "provider": provider,
            "model": model,
            "usage": empty_usage(),
            "stopReason": "stop",
            "timestamp": now_ms() if timestamp is None else timestamp,
        }
        self.prices = prices or {}
        self.started = False
        self.finished = False
        self.usage_reported = False  # the provider said what the call used
        self._json: dict[int, PartialJson] = {}
        self._open: set[int] = set()

    # -- state -----------------------------------------------------------------------------

    @property
    def has_output(self) -> bool:
        """True once any content block has begun: from then on a call is never retried."""
        return bool(self.content)

    def set_usage(self, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0, cache_write_1h: int = 0) -> None:
        set_usage(
            self.message["usage"], self.prices, input=input, output=output, cache_read=cache_read, cache_write=cache_write, cache_write_1h=cache_write_1h
        )
        self.usage_reported = True

    def estimate_usage(self, *, input: int, output: int) -> None:
        """A usage for a call whose stream reported none: the counts given (estimates), priced,
        and marked ``estimated: true`` so nobody takes them for the provider's."""
        set_usage(self.message["usage"], self.prices, input=input, output=output, cache_read=0, cache_write=0)
        self.message["usage"]["estimated"] = True

    def set_response_id(self, response_id: str | None) -> None:
        if response_id and "responseId" not in self.message:
            self.message["responseId"] = response_id

    def reset_before_retry(self) -> None:
        """Forget what an attempt that produced no content left behind (usage, response id)."""
        self.message["usage"] = empty_usage()
        self.usage_reported = False
        self.message.pop("responseId", None)
        self.message["stopReason"] = "stop"

    def _event(self, type_: str, index: int | None = None, delta: str = "") -> StreamEvent:
        return StreamEvent(type_, index, delta, self.message)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> StreamEvent | None:
        """The `start` event, once per stream (a retried attempt does not repeat it)."""
        if self.started:
            return None
        self.started = True
        return self._event("start")

    def done(self, stop_reason: str) -> StreamEvent:
        self._close_scratch()
        self.message["stopReason"] = stop_reason
        self.finished = True
        return StreamEvent("done", None, "", self.message, self.message)

    def fail(self, error_message: str, *, aborted: bool = False) -> StreamEvent:
        self._close_scratch()
        self.message["stopReason"] = "aborted" if aborted else "error"
        self.message["errorMessage"] = error_message or (ABORTED_MESSAGE if aborted else "Unknown error")
        self.finished = True
        return StreamEvent("error", None, "", self.message, self.message)

    def abort(self) -> StreamEvent:
        return self.fail(ABORTED_MESSAGE, aborted=True)

    def _close_scratch(self) -> None:
        for index, partial in self._json.items():
            if partial.text:
                self.content[index]["arguments"] = parse_arguments(partial.text)
        self._json.clear()
        self._open.clear()

    # -- blocks ------------------------------------------------------------------------------

    def is_open(self, index: int) -> bool:
        return index in self._open

    def end_open_blocks(self) -> list[StreamEvent]:
        """End every block still open, in order (for streams that end blocks only at the end)."""
        events = []
        for index, block in enumerate(self.content):
            if index not in self._open:
                continue
            kind = block["type"]
            if kind == "text":
                events.append(self.end_text(index))
            elif kind == "thinking":
                events.append(self.end_thinking(index))
            else:
                events.append(self.end_tool_call(index))
        return events

    def begin_text(self, text: str = "") -> tuple[int, StreamEvent]:
        index = len(self.content)
        self.content.append({"type": "text", "text": text})
        self._open.add(index)
        return index, self._event("text_start", index)

    def text_delta(self, index: int, delta: str) -> StreamEvent:
        block = self.content[index]
        # Take the string out of the block so `+=` can grow it in place (refcount 1):
        # appending stays O(len(delta)) however long the text gets.
        text = block["text"]
        block["text"] = None
        text += delta
        block["text"] = text
        return StreamEvent("text_delta", index, delta, self.message)

    def end_text(self, index: int) -> StreamEvent:
        self._open.discard(index)
        return self._event("text_end", index)

    def begin_thinking(
        self, thinking: str = "", *, signature: str | None = None, redacted: bool = False
    ) -> tuple[int, StreamEvent]:
        index = len(self.content)
        block: dict = {"type": "thinking", "thinking": thinking}
        if signature is not None:
            block["thinkingSignature"] = signature
        if redacted:
            block["redacted"] = True
        self.content.append(block)
        self._open.add(index)
        return index, self._event("thinking_start", index)

    def thinking_delta(self, index: int, delta: str) -> StreamEvent:
        block = self.content[index]
        text = block["thinking"]
        block["thinking"] = None
        text += delta
        block["thinking"] = text
        return StreamEvent("thinking_delta", index, delta, self.message)

    def add_thinking_signature(self, index: int, signature: str) -> None:
        block = self.content[index]
        block["thinkingSignature"] = (block.get("thinkingSignature") or "") + signature

    def end_thinking(self, index: int) -> StreamEvent:
        self._open.discard(index)
        return self._event("thinking_end", index)

    def begin_tool_call(self, tool_call_id: str, name: str, arguments: dict | None = None) -> tuple[int, StreamEvent]:
        index = len(self.content)
        self.content.append({"type": "toolCall", "id": tool_call_id, "name": name, "arguments": arguments or {}})
        self._json[index] = PartialJson()
        self._open.add(index)
        return index, self._event("toolcall_start", index)

    def tool_call_delta(self, index: int, delta: str) -> StreamEvent:
        partial = self._json.get(index)
        if partial is not None and delta:
            partial.feed(delta)
            value = partial.value()
            if isinstance(value, dict):
                self.content[index]["arguments"] = value
        return StreamEvent("toolcall_delta", index, delta, self.message)

    def end_tool_call(self, index: int) -> StreamEvent:
        partial = self._json.pop(index, None)
        if partial is not None and partial.text:
            self.content[index]["arguments"] = parse_arguments(partial.text)
        self._open.discard(index)
        return self._event("toolcall_end", index)
