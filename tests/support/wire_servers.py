"""Real local HTTP servers that speak the LLM providers' streaming wire formats.

`WireServer("anthropic")` answers `POST /v1/messages` with Anthropic Messages SSE;
`WireServer("openai")` and `WireServer("deepseek")` answer `POST /v1/chat/completions`
with chat-completion chunks (DeepSeek adds `reasoning_content` deltas and its usage
fields). The official SDKs talk to them through `base_url`, over real sockets.

Each test scripts what the next requests get (`server.script(...)`), in order:
- `Reply(content, stop_reason, usage)`: a streamed answer rendered from Pi-shaped
  content blocks, with `cut_after=N` (drop the connection after N events),
  `end_after=N` (end the body cleanly after N events),
  `error_after=N` (send the protocol's error event after N events), `hold_after=N`
  (stop after N events until `reply.release` is set), `hold_headers` (the same before
  the status line), `line_end` ("\r\n" or "\r" instead of "\n" in the events) and
  `gzip` (the body gzip-encoded, flushed after every event);
- `Status(code, message, headers)`: an HTTP error with the provider's error body
  (429 + retry-after, 500, 529 overloaded …).
Every request is recorded (`server.requests`: path, headers, JSON body, time, and the
client's address: two requests from one port came over one kept-alive connection).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# -- what the server is told to do ------------------------------------------------------------


@dataclass
class Reply:
    content: list[dict]
    stop_reason: str = "stop"  # Pi's: stop | length | toolUse
    usage: dict | None = field(default_factory=lambda: {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0})  # None: no usage chunk (Chat Completions)
    chunk: int = 5
    cut_after: int | None = None
    end_after: int | None = None  # end the body cleanly after N events (a truncated stream)
    error_after: int | None = None
    error: tuple[str, str] = ("overloaded_error", "Overloaded")
    hold_after: int | None = None
    hold_headers: bool = False  # wait for `release` before even sending the status line
    release: threading.Event = field(default_factory=threading.Event)
    message_id: str = "msg_wire_0001"
    text_phase: str | None = None  # Responses: the message items' ``phase`` (commentary | final_answer)
    line_end: str = "\n"  # how the events' lines end: "\n", "\r\n" or "\r" (all three are SSE)
    gzip: bool = False  # content-encoding: gzip, flushed after each event

    @classmethod
    def of(cls, message: dict, **kwargs) -> Reply:
        """The reply that streams exactly this Pi AssistantMessage."""
        usage = {k: message["usage"][k] for k in ("input", "output", "cacheRead", "cacheWrite")}
        return cls(content=message["content"], stop_reason=message["stopReason"], usage=usage, **kwargs)


@dataclass
class Status:
    code: int
    message: str = "error"
    error_type: str | None = None
    headers: dict = field(default_factory=dict)
    raw_body: bytes | None = None


@dataclass
class Recorded:
    path: str
    headers: dict
    body: dict
    at: float
    peer: tuple = ()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- Anthropic Messages SSE -------------------------------------------------------------------

ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def anthropic_events(reply: Reply, model: str) -> list[tuple[str, dict]]:
    """The (event, data) sequence the Messages API streams for this content."""
    usage = reply.usage
    events: list[tuple[str, dict]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": reply.message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage["input"],
                        "cache_creation_input_tokens": usage["cacheWrite"],
                        "cache_read_input_tokens": usage["cacheRead"],
                        "output_tokens": 1,
                        # The writes by cache lifetime (usage "cacheWrite1h": the 1-hour ones).
                        **({"cache_creation": {"ephemeral_5m_input_tokens": usage["cacheWrite"] - usage["cacheWrite1h"],
                                               "ephemeral_1h_input_tokens": usage["cacheWrite1h"]}} if "cacheWrite1h" in usage else {}),
                    },
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "thinking" and block.get("redacted"):
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "redacted_thinking", "data": block["thinkingSignature"]},
                    },
                )
            )
        elif kind == "thinking":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                )
            )
            for piece in _pieces(block["thinking"], reply.chunk):
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
                    )
                )
            if block.get("thinkingSignature"):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "signature_delta", "signature": block["thinkingSignature"]},
                        },
                    )
                )
        elif kind == "text":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            for piece in _pieces(block["text"], reply.chunk):
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
                )
        elif kind == "toolCall":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                    },
                )
            )
            arguments = _json(block["arguments"])
            for piece in ["", *_pieces(arguments, reply.chunk)]:
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
        else:
            raise ValueError(f"cannot render block type {kind!r}")
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": ANTHROPIC_STOP[reply.stop_reason], "stop_sequence": None},
                "usage": {"output_tokens": usage["output"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_error_event(kind: str, message: str) -> tuple[str, dict]:
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


# -- OpenAI chat-completion chunks ------------------------------------------------------------

OPENAI_FINISH = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}


def openai_chunks(reply: Reply, model: str, *, deepseek: bool = False) -> list[dict]:
    """The chunk objects a chat-completions stream sends (before `data: [DONE]`)."""
    created = 1_700_000_000

    def chunk(delta: dict, finish=None) -> dict:
        return {
            "id": reply.message_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_wire",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    call_index = 0
    for block in reply.content:
        kind = block["type"]
        if kind == "thinking":
            if not deepseek:
                raise ValueError("OpenAI chat completions do not stream reasoning; use deepseek")
            for piece in _pieces(block["thinking"], reply.chunk):
                chunks.append(chunk({"content": None, "reasoning_content": piece}))
        elif kind == "text":
            for piece in _pieces(block["text"], reply.chunk):
                chunks.append(chunk({"content": piece}))
        elif kind == "toolCall":
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": call_index,
                                "id": block["id"],
                                "type": "function",
                                "function": {"name": block["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for piece in _pieces(_json(block["arguments"]), reply.chunk):
                chunks.append(chunk({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}))
            call_index += 1
        else:
            raise ValueError(f"cannot render block type {kind!r}")
    chunks.append(chunk({}, OPENAI_FINISH[reply.stop_reason]))
    usage = reply.usage
    if usage is None:  # an endpoint that sends no usage chunk
        return chunks
    prompt = usage["input"] + usage["cacheRead"]
    wire_usage: dict = {
        "prompt_tokens": prompt,
        "completion_tokens": usage["output"],
        "total_tokens": prompt + usage["output"],
    }
    if deepseek:
        wire_usage["prompt_cache_hit_tokens"] = usage["cacheRead"]
        wire_usage["prompt_cache_miss_tokens"] = usage["input"]
    else:
        wire_usage["prompt_tokens_details"] = {"cached_tokens": usage["cacheRead"], "audio_tokens": 0}
        wire_usage["completion_tokens_details"] = {"reasoning_tokens": 0, "audio_tokens": 0}
    chunks.append({**chunk({}), "choices": [], "usage": wire_usage})
    return chunks


# -- OpenAI Responses SSE ------------------------------------------------------------------------


def responses_events(reply: Reply, model: str) -> list[dict]:
    """The events a Responses stream sends (each as `event: <type>` + data).

    Thinking blocks are reasoning items (summary text streamed, the item with
    ``encrypted_content`` at the end); a tool call's id ``call|item`` gives the call
    id and the item id.
    """
    events: list[dict] = []

    def emit(kind: str, **data) -> None:
        events.append({"type": kind, "sequence_number": len(events), **data})

    response = {"id": reply.message_id, "object": "response", "created_at": 1_700_000_000, "model": model, "output": []}
    emit("response.created", response={**response, "status": "in_progress"})
    emit("response.in_progress", response={**response, "status": "in_progress"})
    done_items = []
    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "thinking":
            item_id = f"rs_{index:04d}"
            emit("response.output_item.added", output_index=index, item={"type": "reasoning", "id": item_id, "summary": []})
            parts = block["thinking"].split("\n\n")
            for number, part in enumerate(parts):
                emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=number, part={"type": "summary_text", "text": ""})
                for piece in _pieces(part, reply.chunk):
                    emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=number, delta=piece)
                emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=number, text=part)
                emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=number, part={"type": "summary_text", "text": part})
            item = {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": p} for p in parts], "encrypted_content": f"enc-{index}"}
        elif kind == "text":
            item_id = f"msg_{index:04d}"
            emit("response.output_item.added", output_index=index, item={"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []})
            emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part={"type": "output_text", "text": "", "annotations": []})
            for piece in _pieces(block["text"], reply.chunk):
                emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=piece, logprobs=[])
            emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=block["text"], logprobs=[])
            part = {"type": "output_text", "text": block["text"], "annotations": []}
            emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [part]}
            if reply.text_phase:
                item["phase"] = reply.text_phase
        elif kind == "toolCall":
            call_id, _, item_id = block["id"].partition("|")
            item_id = item_id or f"fc_{index:04d}"
            arguments = _json(block["arguments"])
            emit("response.output_item.added", output_index=index, item={"type": "function_call", "id": item_id, "call_id": call_id, "name": block["name"], "arguments": "", "status": "in_progress"})
            for piece in _pieces(arguments, reply.chunk):
                emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
            emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
            item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": block["name"], "arguments": arguments, "status": "completed"}
        else:
            raise ValueError(f"cannot render block type {kind!r}")
        emit("response.output_item.done", output_index=index, item=item)
        done_items.append(item)
    usage = reply.usage
    prompt = usage["input"] + usage["cacheRead"]
    final = {
        **response,
        "output": done_items,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": usage["cacheRead"]},
            "output_tokens": usage["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + usage["output"],
        },
    }
    if reply.stop_reason == "length":
        emit("response.incomplete", response={**final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}})
    else:
        emit("response.completed", response={**final, "status": "completed", "incomplete_details": None})
    return events


# -- the server -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - quiet in tests
        pass

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        wire = self.server.wire
        wire.requests.append(
            Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic(), self.client_address)
        )
        expected = {"anthropic": "/v1/messages", "openai-responses": "/v1/responses"}.get(wire.protocol, "/v1/chat/completions")
        if self.path.split("?")[0] != expected:
            self._status(Status(404, f"unknown path {self.path}"))
            return
        behaviour = wire.next_behaviour()
        if isinstance(behaviour, Status):
            self._status(behaviour)
        else:
            self._stream(behaviour, body.get("model", "model"))

    # HTTP errors

    def _status(self, status: Status) -> None:
        wire = self.server.wire
        if status.raw_body is not None:
            payload = status.raw_body
        elif wire.protocol == "anthropic":
            kind = status.error_type or ANTHROPIC_ERROR_TYPES.get(status.code, "api_error")
            payload = _json({"type": "error", "error": {"type": kind, "message": status.message}}).encode()
        else:
            kind = status.error_type or ("requests" if status.code == 429 else "server_error")
            payload = _json({"error": {"message": status.message, "type": kind, "param": None, "code": None}}).encode()
        self.send_response(status.code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", "req_wire")
        for key, value in status.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    # streams

    def _chunk(self, text: str, compress=None) -> None:
        data = text.encode()
        if compress is not None:
            data = compress.compress(data) + compress.flush(zlib.Z_SYNC_FLUSH)
        self._raw_chunk(data)

    def _raw_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, reply: Reply, model: str) -> None:
        wire = self.server.wire
        if wire.protocol == "anthropic":
            frames = [f"event: {name}\ndata: {_json(data)}\n\n" for name, data in anthropic_events(reply, model)]
            name, data = anthropic_error_event(*reply.error)
            error_frame = f"event: {name}\ndata: {_json(data)}\n\n"
        elif wire.protocol == "openai-responses":
            frames = [f"event: {e['type']}\ndata: {_json(e)}\n\n" for e in responses_events(reply, model)]
            kind, message = reply.error
            error_frame = f"event: error\ndata: {_json({'type': 'error', 'code': kind, 'message': message, 'param': None, 'sequence_number': 0})}\n\n"
        else:
            chunks = openai_chunks(reply, model, deepseek=wire.protocol == "deepseek")
            frames = [f"data: {_json(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
            kind, message = reply.error
            error_frame = f"data: {_json({'error': {'message': message, 'type': kind, 'param': None, 'code': None}})}\n\n"
        if reply.line_end != "\n":
            frames = [frame.replace("\n", reply.line_end) for frame in frames]
            error_frame = error_frame.replace("\n", reply.line_end)
        compress = zlib.compressobj(wbits=31) if reply.gzip else None  # 31: the gzip format
        if reply.hold_headers:
            reply.release.wait(10)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        if compress is not None:
            self.send_header("content-encoding", "gzip")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", "req_wire")
        self.end_headers()
        try:
            for number, frame in enumerate(frames):
                if reply.hold_after is not None and number == reply.hold_after:
                    reply.release.wait(10)
                if reply.cut_after is not None and number == reply.cut_after:
                    self._drop()
                    return
                if reply.end_after is not None and number == reply.end_after:
                    break
                if reply.error_after is not None and number == reply.error_after:
                    self._chunk(error_frame, compress)
                    break
                self._chunk(frame, compress)
            if compress is not None:
                self._raw_chunk(compress.flush())  # the gzip trailer
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (cancelled)

    def _drop(self) -> None:
        """Close the socket in the middle of the chunked body."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    wire: WireServer

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], ConnectionError):  # a client cut its connection (a cancelled call)
            return
        super().handle_error(request, client_address)


class WireServer:
    def __init__(self, protocol: str, tls: tuple[str, str] | None = None) -> None:
        """``tls``: (certificate file, key file) to serve HTTPS."""
        if protocol not in ("anthropic", "openai", "openai-responses", "deepseek"):
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol = protocol
        self.scheme = "https" if tls else "http"
        self.requests: list[Recorded] = []
        self._queue: list = []
        self._replies: list[Reply] = []  # every scripted reply, to release held ones at the end
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.wire = self
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"wire-{protocol}", daemon=True
        )

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        for reply in self._replies:
            reply.release.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        root = f"{self.scheme}://127.0.0.1:{self.port}"
        return root if self.protocol == "anthropic" else f"{root}/v1"

    def script(self, *behaviours) -> None:
        with self._lock:
            self._queue.extend(behaviours)
            self._replies.extend(b for b in behaviours if isinstance(b, Reply))

    def reset(self) -> None:
        with self._lock:
            for reply in self._replies:
                reply.release.set()
            self._replies.clear()
            self._queue.clear()
            self.requests.clear()

    def next_behaviour(self):
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        return Status(500, "wire server: no scripted response left", error_type="api_error")


# -- comparing what providers produced --------------------------------------------------------

PROVENANCE_KEYS = ("api", "provider", "model", "timestamp", "responseId")


def comparable(message: dict) -> dict:
    """An AssistantMessage without what says who made it and when (api, provider, model, …)."""
    return {k: v for k, v in message.items() if k not in PROVENANCE_KEYS}


def terminal_events(events) -> list:
    return [e for e in events if e.type in ("done", "error")]


# --- requests the wire tests send ------------------------------------------------------


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def ask(text: str = "hello", **kwargs):
    from runtime.llm import LlmRequest

    return LlmRequest(system_prompt="You are terse.", messages=[user(text)], tools=kwargs.pop("tools", []), **kwargs)


# --- scaffolding the wire test modules share ---------------------------------------------------

FAST_RETRY = {"retry_base_delay": 0.01, "timeout": 10}


def serve(protocol: str, name: str = "server"):
    """(server, clean): a module-scoped WireServer fixture called ``name`` and an autouse
    one that resets it around each test. In a test module:
    ``server, clean = serve("anthropic")``."""
    import pytest

    @pytest.fixture(scope="module", name=name)
    def server():
        with WireServer(protocol) as wire:
            yield wire

    @pytest.fixture(autouse=True, name=f"_reset_{name}")
    def clean(request):
        wire = request.getfixturevalue(name)
        wire.reset()
        yield
        wire.reset()

    return server, clean


def wire_spec(server, defaults: dict, overrides: dict):
    """A ModelSpec for ``server``: ``defaults`` (kind, model, key…), then ``overrides``;
    options start from FAST_RETRY."""
    from runtime.llm import ModelSpec

    options = {**FAST_RETRY, **overrides.pop("options", {})}
    return ModelSpec(**{"base_url": server.base_url, **defaults, "options": options, **overrides})
