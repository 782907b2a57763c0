"""A streamed reply's server-sent events, read from the SDK's response as JSON objects.

The SDKs parse each event line by line in Python, build a `ServerSentEvent` and decode
its text with ``json``; on a streamed reply (hundreds of small events) that was a third
of a worker's CPU per event after the transport. Here the response's bytes are split on
blank lines as the SSE standard says (``\\n``, ``\\r\\n`` or ``\\r`` line ends, ``:``
comments, one optional space after the colon, multi-line ``data`` joined by ``\\n``, an
unterminated last event dropped) and each event's data goes to orjson as bytes.

The request, the status check, the retry rules and every error stay the SDK's: the
stream is the SDK's own `Stream` object (its ``response`` already open and checked),
and what each SDK's stream does with an event is kept as it is:

* Anthropic: ``ping`` and unnamed events are skipped; an ``error`` event raises the
  client's status error for its body (as `Stream.__stream__`);
* OpenAI chat completions and Responses: ``[DONE]`` ends the stream; a chunk with an
  ``error`` raises `openai.APIError` with its message and body. A Responses event is
  handed over as a `JsonView`, which the Responses decoder reads as it reads the SDK's
  event models.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import orjson

from .retry import Failure, ProviderError

_BOM = b"\xef\xbb\xbf"

MAX_EVENT_BYTES = 64 * 1024 * 1024  # no reply sends one event this large: a broken or hostile server


def loads(data: bytes):
    """JSON from bytes: orjson, or the standard decoder for what orjson refuses (NaN, an
    integer wider than 64 bits) so that a payload the SDK read is read the same."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _event(block: bytes) -> tuple[bytes | None, bytes | None]:
    """(event name, data) of one event's lines (no blank line inside)."""
    event = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value or None  # an empty type is no type (the standard's default, "message")
        # "id", "retry", a comment (empty name) and unknown fields: nothing a reply needs
    return event, (b"\n".join(data) if data else None)


def sse_events(chunks: Iterable[bytes]) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(event name or None, data or None) of each event in a byte stream.

    Linear in the stream: each chunk's line ends are made ``\n`` once (a ``\r`` ending one
    chunk and a ``\n`` starting the next are one line end), and the search for a blank line
    resumes where the last one stopped. An event past ``MAX_EVENT_BYTES`` ends the stream
    with a `ProviderError` instead of growing the buffer without end."""
    buffer = bytearray()
    scanned = 0  # the buffer holds no blank line before this offset
    carriage = False  # the last chunk ended with "\r"
    first = True
    for chunk in chunks:
        if not chunk:
            continue
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        if carriage and chunk[:1] == b"\n":
            chunk = chunk[1:]
        carriage = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buffer += chunk
        start = 0
        search = max(0, scanned - 1)
        while (end := buffer.find(b"\n\n", search)) >= 0:
            block = bytes(buffer[start:end])
            start = search = end + 2
            if block[:1] == b"\n":
                block = block[1:]
            if block:
                event, data = _event(block)
                if event is not None or data is not None:
                    yield event, data
        if start:
            del buffer[:start]
        scanned = len(buffer)
        if scanned > MAX_EVENT_BYTES:
            raise ProviderError(Failure(f"The model's stream sent an event larger than {MAX_EVENT_BYTES:,} bytes"))


class _Events:
    """Iterates the JSON objects of an SDK stream's events; ``response`` is the SDK's (the
    stream pump shuts its socket down to cancel), ``close`` closes it."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.response = stream.response

    def __iter__(self):
        try:
            yield from self._objects(sse_events(self.response.iter_bytes()))
        finally:
            self.response.close()

    def close(self) -> None:
        self.response.close()

    def _objects(self, events):
        raise NotImplementedError


class AnthropicEvents(_Events):
    def _objects(self, events):
        for event, data in events:
            if event is None or event == b"ping":
                continue
            if event == b"error":
                text = (data or b"").decode("utf-8", "replace")
                try:
                    body = loads(data)
                    message = f"{body}"
                except ValueError:
                    body = text
                    message = text or f"Error code: {self.response.status_code}"
                raise self.stream._client._make_status_error(message, body=body, response=self.response)
            if data:
                yield loads(data)


class OpenAIChatEvents(_Events):
    def _objects(self, events):
        import openai  # the SDK (~0.4 s) loads with the first OpenAI stream, not with this module

        for _event_name, data in events:
            if not data:
                continue
            if data.startswith(b"[DONE]"):
                return
            chunk = loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                if not message or not isinstance(message, str):
                    message = "An error occurred during streaming"
                raise openai.APIError(message=message, request=self.response.request, body=error)
            yield chunk


class JsonView:
    """A JSON object read by attribute, as the SDK's models are: a missing key is None,
    a nested object is a view too (``event.item.summary``)."""

    __slots__ = ("data",)

    def __init__(self, data: dict) -> None:
        self.data = data

    def __getattr__(self, name: str):
        value = self.data.get(name)
        if type(value) is dict:
            return JsonView(value)
        if type(value) is list:
            return [JsonView(v) if type(v) is dict else v for v in value]
        return value


class OpenAIResponsesEvents(OpenAIChatEvents):
    def _objects(self, events):
        for event in super()._objects(events):
            yield JsonView(event) if type(event) is dict else event
