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

Events that arrived together (one piece of the body: what a paced read gathered during its
wait, ``transport.read_pace``) are parsed together, and consecutive text, thinking or
argument deltas of one block among them (Anthropic's ``content_block_delta``, a chat
completion's one-choice chunks) are handed over as one delta with their texts joined: the
reply is the same, and the layers above (decoder, builder, the turn's forwarding and
coalescing) work once per wake-up instead of once per event. A stream read as it comes has
one event a piece and is handed over event by event. Responses events are never joined.
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
    """(event name or None, data or None) of each event in a byte stream."""
    for group in event_groups(chunks):
        yield from group


def event_groups(chunks: Iterable[bytes]) -> Iterator[list[tuple[bytes | None, bytes | None]]]:
    """The events of a byte stream as ``sse_events`` reads them, a list for each piece of it
    that ends at least one (the events a piece completes arrived together: a paced read hands
    up what came during its wait as one piece).

    Linear in the stream: each chunk's line ends are made ``\\n`` once (a ``\\r`` ending one
    chunk and a ``\\n`` starting the next are one line end), and the search for a blank line
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
        group = []
        while (end := buffer.find(b"\n\n", search)) >= 0:
            block = bytes(buffer[start:end])
            start = search = end + 2
            if block[:1] == b"\n":
                block = block[1:]
            if block:
                event, data = _event(block)
                if event is not None or data is not None:
                    group.append((event, data))
        if group:
            yield group
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
            yield from self._objects(event_groups(self.response.iter_bytes()))
        finally:
            self.response.close()

    def close(self) -> None:
        self.response.close()

    def _objects(self, groups):
        raise NotImplementedError


# An Anthropic delta's type -> its text field: consecutive deltas of one block with only that
# text are one delta with the texts joined.
_ANTHROPIC_TEXT = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def _joined_anthropic(held, event) -> bool:
    """Whether ``event`` continues ``held`` (a ``content_block_delta`` of the same block and
    kind, each with its text alone); if so its text is added to ``held``'s."""
    if type(event) is not dict or type(held) is not dict or event.get("type") != "content_block_delta":
        return False
    if held.get("type") != "content_block_delta" or held.get("index") != event.get("index") or len(held) != 3 or len(event) != 3:
        return False
    delta, before = event.get("delta"), held.get("delta")
    if type(delta) is not dict or type(before) is not dict or len(delta) != 2 or len(before) != 2:
        return False
    field = _ANTHROPIC_TEXT.get(delta.get("type"))
    if field is None or before.get("type") != delta.get("type"):
        return False
    text, was = delta.get(field), before.get(field)
    if type(text) is not str or type(was) is not str:
        return False
    before[field] = was + text
    return True


def _joined_chat(held, chunk, fields: tuple[str, ...]) -> bool:
    """Whether chat completion ``chunk`` continues ``held``: one choice of the same index in
    each, no finish reason, usage or log probabilities, the same text field (``fields``) as
    the delta's one value or a piece of the same tool call's arguments alone, and the same
    id, model and every other key; if so its text is added to ``held``'s."""
    if type(chunk) is not dict or type(held) is not dict or chunk.keys() != held.keys() or chunk.get("usage") is not None:
        return False
    choices, before = chunk.get("choices"), held.get("choices")
    if type(choices) is not list or type(before) is not list or len(choices) != 1 or len(before) != 1:
        return False
    choice, was = choices[0], before[0]
    if type(choice) is not dict or type(was) is not dict or choice.keys() != was.keys():
        return False
    for key, value in choice.items():
        if key == "delta":
            continue
        if (key != "index" and value is not None) or was[key] != value:
            return False
    delta, previous = choice.get("delta"), was.get("delta")
    if type(delta) is not dict or type(previous) is not dict:
        return False
    field = _only_text(delta, fields)
    if field is not None:
        if _only_text(previous, fields) != field:
            return False
        target, text = previous, delta[field]
    else:
        # A tool call's arguments: one call of the same index, its arguments alone (the
        # call's first chunk, with its id and name, is never joined to).
        call, before = _arguments_only(delta), _arguments_only(previous)
        if call is None or before is None or call.get("index") != before.get("index"):
            return False
        target, field, text = before["function"], "arguments", call["function"]["arguments"]
    for key, value in chunk.items():
        if key != "choices" and held[key] != value:
            return False
    target[field] += text
    return True


def _arguments_only(delta: dict) -> dict | None:
    """The one tool call of ``delta`` when it carries a piece of its arguments and nothing
    else (its index aside), else None."""
    if any(value is not None for key, value in delta.items() if key != "tool_calls"):
        return None
    calls = delta.get("tool_calls")
    if type(calls) is not list or len(calls) != 1 or type(calls[0]) is not dict:
        return None
    call = calls[0]
    function = call.get("function")
    if any(value is not None for key, value in call.items() if key not in ("index", "function")) or type(function) is not dict:
        return None
    if type(function.get("arguments")) is not str or any(value is not None for key, value in function.items() if key != "arguments"):
        return None
    return call


def _only_text(delta: dict, fields: tuple[str, ...]) -> str | None:
    """The one key of ``delta`` with a value when it is one of ``fields`` and a string, else None."""
    found = None
    for key, value in delta.items():
        if value is None:
            continue
        if found is not None or key not in fields or type(value) is not str:
            return None
        found = key
    return found


class AnthropicEvents(_Events):
    """The events' JSON objects; the deltas of one block that arrived together (one group)
    are handed over as one (``_joined_anthropic``): what the layers above do per delta, they
    do once for each paced wake-up of a busy worker's stream."""

    def _objects(self, groups):
        for group in groups:
            held = None
            for event, data in group:
                if event is None or event == b"ping":
                    continue
                if event == b"error":
                    if held is not None:
                        yield held
                        held = None
                    text = (data or b"").decode("utf-8", "replace")
                    try:
                        body = loads(data)
                        message = f"{body}"
                    except ValueError:
                        body = text
                        message = text or f"Error code: {self.response.status_code}"
                    raise self.stream._client._make_status_error(message, body=body, response=self.response)
                if not data:
                    continue
                item = loads(data)
                if held is not None:
                    if _joined_anthropic(held, item):
                        continue
                    yield held
                held = item
            if held is not None:
                yield held


class OpenAIChatEvents(_Events):
    """The chunks' JSON objects; text chunks of one choice that arrived together are handed
    over as one (``_joined_chat``), as Anthropic's deltas are."""

    joins = True

    def _objects(self, groups):
        import openai  # the SDK (~0.4 s) loads with the first OpenAI stream, not with this module

        from .openai_completions import REASONING_FIELDS  # a cycle: that module imports this one

        fields = ("content", *REASONING_FIELDS) if self.joins else ()
        for group in groups:
            held = None
            for _event_name, data in group:
                if not data:
                    continue
                if data.startswith(b"[DONE]"):
                    if held is not None:
                        yield held
                    return
                chunk = loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    if held is not None:
                        yield held
                        held = None
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else None
                    if not message or not isinstance(message, str):
                        message = "An error occurred during streaming"
                    raise openai.APIError(message=message, request=self.response.request, body=error)
                if held is not None:
                    if fields and _joined_chat(held, chunk, fields):
                        continue
                    yield held
                held = chunk
            if held is not None:
                yield held


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
    joins = False  # its events are handed over one by one

    def _objects(self, groups):
        for event in super()._objects(groups):
            yield JsonView(event) if type(event) is dict else event
