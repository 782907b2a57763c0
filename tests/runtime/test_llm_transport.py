"""How a streamed reply is read: the SDK clients' HTTP transport (urllib3) and the
server-sent-event parser, against the SDK's own parser and local wire servers."""

from __future__ import annotations

import subprocess
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.llm import stream
from runtime.llm.sse import sse_events
from runtime.llm.transport import use_for
from tests.support.wire_servers import Reply, WireServer, ask, terminal_events, wire_spec

TEXT = {"type": "text", "text": "Héllo — a reply in several deltas, with ünïcode and a final word."}
CALL = {"type": "toolCall", "id": "call_01A|fc_01A", "name": "ls", "arguments": {"path": ".", "limit": 20}}
KINDS = {
    "anthropic": {"provider_kind": "anthropic", "model_id": "claude-test-1", "provider_name": "anthropic", "api_key": "k"},
    "openai": {"provider_kind": "openai", "model_id": "gpt-test", "provider_name": "openai", "api_key": "k"},
    "openai-responses": {"provider_kind": "openai-responses", "model_id": "o-test", "provider_name": "openai", "api_key": "k"},
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def wire(request):
    with WireServer(request.param) as server:
        yield server


def spec(server):
    return wire_spec(server, KINDS[server.protocol], {})


# -- the parser reads what the SDK's parser reads ------------------------------------------------

_names = st.sampled_from(["", "message_start", "content_block_delta", "ping", "error", "ünï"])
_values = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)
_lines = st.one_of(
    st.tuples(st.just("data"), _values),
    st.tuples(st.just("event"), _names),
    st.tuples(st.sampled_from(["id", "retry", "", "unknown"]), _values),  # "": a comment
)


@st.composite
def sse_streams(draw):
    """A byte stream of events with any line ends, comments, fields and spacing, cut anywhere."""
    events = draw(st.lists(st.lists(_lines, min_size=1, max_size=4), max_size=6))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    space = draw(st.sampled_from(["", " "]))
    text = "".join(end.join(f"{name}:{space}{value}" for name, value in lines) + end + end for lines in events)
    if draw(st.booleans()):
        text += "data: an event that never ends"  # no blank line: dropped
    body = text.encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


@settings(max_examples=200, deadline=None)
@given(sse_streams())
def test_the_parser_reads_every_stream_as_the_sdks_parser_does(chunks):
    from anthropic._streaming import SSEDecoder

    theirs = [(sse.event or None, sse.data) for sse in SSEDecoder().iter_bytes(iter(chunks))]
    ours = [(event.decode() if event is not None else None, (data or b"").decode()) for event, data in sse_events(chunks)]
    # What a reply reads: events with a name or with data (the SDK also dispatches one with
    # only an id or a retry, and both SDKs skip an unnamed event without data).
    assert [e for e in ours if e[0] is not None or e[1]] == [e for e in theirs if e[0] is not None or e[1]]
    assert len(ours) <= len(theirs)


def test_a_leading_byte_order_mark_and_a_carriage_return_split_from_its_line_feed():
    chunks = [b"\xef\xbb\xbfevent: a\r", b"\ndata: 1\r", b"\n\r", b"\nevent: b\rdata: 2\r\r"]
    assert list(sse_events(chunks)) == [(b"a", b"1"), (b"b", b"2")]


def test_an_event_that_never_ends_stops_the_stream_at_the_limit_with_the_reason(monkeypatch):
    """A broken or hostile server that sends one endless event: the reply fails with the
    reason once the event passes the limit, instead of the buffer growing without end."""
    import runtime.llm.sse as sse
    from runtime.llm.retry import ProviderError

    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 64 * 1024)

    def endless():
        yield b"event: message_start\ndata: {}\n\n"
        yield b"event: content_block_delta\ndata: "
        while True:
            yield b"x" * 1000  # no line end, ever

    events = sse.sse_events(endless())
    assert next(events) == (b"message_start", b"{}")
    with pytest.raises(ProviderError, match="larger than 65,536 bytes"):
        next(events)


def test_a_reply_cut_into_one_byte_pieces_parses_the_same():
    body = "".join(f"event: e{i}\r\ndata: {{\"n\": {i}}}\r\n\r\n" for i in range(200)).encode()
    assert list(sse_events(body[i : i + 1] for i in range(len(body)))) == [(f"e{i}".encode(), f'{{"n": {i}}}'.encode()) for i in range(200)]


# -- replies over the wire ---------------------------------------------------------------------


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_a_reply_streams_whole_with_any_line_ends_and_gzip(wire, line_end, gzip):
    wire.reset()
    wire.script(Reply([TEXT, CALL], stop_reason="toolUse", chunk=3, line_end=line_end, gzip=gzip))
    events = list(stream(spec(wire), ask()))
    message = terminal_events(events)[0].message
    assert message["stopReason"] == "toolUse", message.get("errorMessage")
    assert [{k: v for k, v in block.items() if k != "textSignature"} for block in message["content"]] == [TEXT, CALL]
    assert "".join(e.delta for e in events if e.type == "text_delta") == TEXT["text"]
    assert wire.requests[-1].headers.get("accept-encoding")  # the SDK's own headers went out


def test_calls_one_after_another_share_a_connection_and_a_cancelled_one_is_not_reused(wire):
    wire.reset()
    wire.script(Reply([TEXT]), Reply([TEXT]))
    for _ in range(2):
        assert terminal_events(list(stream(spec(wire), ask())))[0].message["stopReason"] == "stop"
    first, second = wire.requests
    if wire.protocol == "anthropic":  # the SDKs stop reading chat completions at [DONE], before the body's end
        assert first.peer == second.peer  # kept alive: no new connection (a TLS handshake with a real provider)

    held = Reply([TEXT], hold_after=1)  # the head and one event, then the server goes silent
    wire.script(held, Reply([TEXT]))
    cancel = threading.Event()
    events = []
    for event in stream(spec(wire), ask(), cancel=cancel):
        events.append(event)
        cancel.set()  # cancelled while the read waits
    held.release.set()
    assert events[-1].message["stopReason"] == "aborted"
    assert terminal_events(list(stream(spec(wire), ask())))[0].message["stopReason"] == "stop"
    assert wire.requests[-1].peer != wire.requests[-2].peer  # the cut connection was not reused


def test_a_process_behind_a_proxy_keeps_the_default_transport(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert use_for()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert not use_for()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl): (certificate file, key file)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


def test_https_streams_through_the_transport_and_an_unknown_certificate_is_refused(certificate, monkeypatch):
    import anthropic
    import httpx2

    from runtime.llm.sse import AnthropicEvents
    from runtime.llm.transport import Urllib3Transport

    with WireServer("anthropic", tls=certificate) as server:
        assert server.base_url.startswith("https://")
        # The shared client verifies the server against the system's authorities: no reply is read.
        message = terminal_events(list(stream(spec(server), ask())))[0].message
        assert message["stopReason"] == "error" and message["errorMessage"].startswith("Connection error")
        assert "CERTIFICATE_VERIFY_FAILED" in message["errorMessage"] and not wire_requests(server)
        # A transport that trusts it (SSL_CERT_FILE, which httpx's context reads) streams the reply.
        monkeypatch.setenv("SSL_CERT_FILE", certificate[0])
        http = httpx2.Client(transport=Urllib3Transport())
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0, http_client=http)
        server.script(Reply([TEXT]))
        events = AnthropicEvents(client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True))
        text = "".join(e["delta"]["text"] for e in events if e.get("type") == "content_block_delta")
        assert text == TEXT["text"] and len(wire_requests(server)) == 1
        http.close()


def wire_requests(server) -> list:
    return [r for r in server.requests if r.path == "/v1/messages"]


# -- reading an event stream at a pace -------------------------------------------------------


def _serve_once(content_type: str, chunks: list[bytes], gap: float) -> tuple[str, threading.Thread]:
    """A one-request HTTP server on loopback: a chunked body of ``chunks``, ``gap`` seconds
    apart, each chunk in a write of its own."""
    import socket
    import time

    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        with conn, listener:
            conn.recv(65536)  # the request (small, one read)
            conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n".encode())
            for chunk in chunks:
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                time.sleep(gap)
            conn.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/", thread


def _read(url: str, pace, monkeypatch, pieces: list | None = None) -> tuple[bytes, list[float], float]:
    """The body read through the transport with ``read_pace`` set to ``pace``, the waits it
    made, and how long the reading took; ``pieces`` gets the body's pieces as handed up."""
    import time

    import httpx2

    from runtime.llm import transport

    waits = []

    def sleep(seconds, wake=None):
        waits.append(seconds)
        time.sleep(seconds)

    monkeypatch.setattr(transport, "_sleep", sleep)
    token = transport.read_pace.set(pace)
    start = time.monotonic()
    try:
        with httpx2.Client(transport=transport.Urllib3Transport()) as client, client.stream("GET", url) as response:
            got = list(response.iter_raw())
    finally:
        transport.read_pace.reset(token)
    if pieces is not None:
        pieces.extend(got)
    return b"".join(got), waits, time.monotonic() - start


def test_an_event_stream_read_at_a_pace_gathers_its_events_and_loses_none(monkeypatch):
    events = [b"event: e%d\ndata: {\"n\": %d}\n\n" % (i, i) for i in range(30)]
    url, server = _serve_once("text/event-stream", events, gap=0.02)
    pieces = []
    body, waits, took = _read(url, lambda: 0.2, monkeypatch, pieces)
    server.join(5)
    assert body == b"".join(events)
    # 30 events over ~0.6 s read in a wake-up every 0.2 s: a wait per 0.2 s at most, none longer
    # than the pace (a read that would block waits; one that finds bytes waiting does not).
    assert 1 <= len(waits) <= took / 0.2 + 1 and len(waits) < len(events) / 3 and max(waits) <= 0.2, (waits, took)
    # What came during a wait goes up as one piece: about one a wake-up, not one an event.
    assert len(pieces) <= 2 * len(waits) + 2 < len(events), (len(pieces), len(waits))


def test_a_pace_of_zero_and_a_body_that_is_not_an_event_stream_are_read_as_they_come(monkeypatch):
    from runtime.llm import transport

    counted = []
    monkeypatch.setattr(transport, "_counted", lambda response: counted.append(response))
    events = [b"data: %d\n\n" % i for i in range(10)]
    url, server = _serve_once("text/event-stream", events, gap=0.01)
    body, waits, _ = _read(url, lambda: 0.0, monkeypatch)
    server.join(5)
    # A lone stream's pace (0) never waits, and its body keeps the response's own reader.
    assert body == b"".join(events) and all(w <= 0 for w in waits) and counted == []
    parts = [b'{"a": ', b"1", b"}"]
    url, server = _serve_once("application/json", parts, gap=0.01)
    body, waits, _ = _read(url, lambda: 5.0, monkeypatch)
    server.join(5)
    assert body == b'{"a": 1}' and waits == []


def test_an_aborted_stream_ends_while_its_reads_are_paced(wire):
    import time

    wire.reset()
    held = Reply([TEXT], hold_after=1)
    wire.script(held)
    from runtime.llm import transport

    cancel = threading.Event()
    # A pace far longer than the test: the run's cancel event (``read_wake``) ends the wait.
    tokens = transport.read_pace.set(lambda: 30.0), transport.read_wake.set(cancel)
    timer = threading.Timer(0.3, cancel.set)  # cancelled while the next read waits its pace
    start = time.monotonic()
    try:
        events = []
        for event in stream(spec(wire), ask(), cancel=cancel):
            events.append(event)
            if not timer.is_alive() and not cancel.is_set():
                timer.start()
    finally:
        timer.cancel()
        transport.read_pace.reset(tokens[0])
        transport.read_wake.reset(tokens[1])
        held.release.set()
    assert events[-1].message["stopReason"] == "aborted"
    assert time.monotonic() - start < 10, "the abort waited out the pace"


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_paced_replies_read_whole_over_plain_and_tls_and_keep_their_connection(tls, certificate, monkeypatch):
    import anthropic
    import httpx2

    from runtime.llm import transport
    from runtime.llm.sse import AnthropicEvents

    if tls:
        monkeypatch.setenv("SSL_CERT_FILE", certificate[0])
    readers = []
    counted = transport._counted
    monkeypatch.setattr(transport, "_counted", lambda response: readers.append(counted(response)) or readers[-1])
    with WireServer("anthropic", tls=certificate if tls else None) as server:
        http = httpx2.Client(transport=transport.Urllib3Transport())
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0, http_client=http)
        token = transport.read_pace.set(lambda: 0.05)
        try:
            for _ in range(2):
                server.script(Reply([TEXT], chunk=2))
                events = AnthropicEvents(client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True))
                text = "".join(e["delta"]["text"] for e in events if e.get("type") == "content_block_delta")
                assert text == TEXT["text"]
        finally:
            transport.read_pace.reset(token)
            http.close()
        first, second = wire_requests(server)
        assert first.peer == second.peer  # the paced body was read to its end: the connection was kept
    # Both bodies were read through the counting reader (a TLS socket's too), and closed.
    assert len(readers) == 2 and all(r is not None and r.closed for r in readers)


# -- events that arrive together are handed over together ----------------------------------


def _stream_paced(server, reply: Reply, pace) -> list:
    """The events of ``reply`` through the layer, its body read at ``pace`` (None: as it comes)."""
    from runtime.llm import transport

    server.reset()
    server.script(reply)
    token = transport.read_pace.set(pace)
    try:
        return list(stream(spec(server), ask(), cancel=threading.Event()))
    finally:
        transport.read_pace.reset(token)


def _without_times(message: dict) -> dict:
    return {k: v for k, v in message.items() if k not in ("timestamp", "responseId")}


def test_deltas_read_together_are_joined_and_the_reply_is_the_same(wire):
    """A paced read (a busy worker's) hands the layer everything that came during its wait:
    the text and tool-call deltas of one block among it become one delta each (Responses
    events stay one by one), and the reply, its text and its arguments are what a read as
    it comes gives."""
    text = {"type": "text", "text": "a longer answer, " * 40}
    came = _stream_paced(wire, Reply([text, CALL], stop_reason="toolUse"), None)
    paced = _stream_paced(wire, Reply([text, CALL], stop_reason="toolUse"), lambda: 0.05)
    final, final_paced = terminal_events(came)[0].message, terminal_events(paced)[0].message
    assert final_paced["stopReason"] == "toolUse", final_paced.get("errorMessage")
    assert _without_times(final_paced) == _without_times(final)
    for kind in ("text_delta", "toolcall_delta"):
        one_by_one = [e.delta for e in came if e.type == kind]
        joined = [e.delta for e in paced if e.type == kind]
        assert "".join(joined) == "".join(one_by_one)
        if wire.protocol == "openai-responses":
            assert len(joined) == len(one_by_one)
        else:
            assert len(joined) < len(one_by_one) / 2, (kind, len(joined), len(one_by_one))
    assert "".join(e.delta for e in paced if e.type == "text_delta") == text["text"]


def test_an_error_after_joined_deltas_keeps_the_text_before_it(wire):
    """The deltas held for joining go up before the stream's error event raises: the partial
    reply and the error are what a read as it comes gives."""
    text = {"type": "text", "text": "words before the error " * 10}
    came = terminal_events(_stream_paced(wire, Reply([text], error_after=30), None))[0].message
    paced = terminal_events(_stream_paced(wire, Reply([text], error_after=30), lambda: 0.05))[0].message
    assert came["stopReason"] == paced["stopReason"] == "error"
    assert paced["errorMessage"] == came["errorMessage"]
    assert paced["content"] == came["content"] and paced["content"][0]["text"]


def test_only_deltas_that_continue_one_block_with_their_text_alone_are_joined():
    from runtime.llm.sse import _joined_anthropic, _joined_chat

    def delta(index=0, kind="text_delta", text="b", **extra):
        field = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}.get(kind, "text")
        return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text, **extra}}

    held = delta(text="a")
    assert _joined_anthropic(held, delta(text="b")) and held["delta"]["text"] == "ab"
    held = delta(kind="input_json_delta", text='{"a"')
    assert _joined_anthropic(held, delta(kind="input_json_delta", text=": 1}")) and held["delta"]["partial_json"] == '{"a": 1}'
    for before, after in [
        (delta(), delta(index=1)),  # another block
        (delta(), delta(kind="thinking_delta")),  # another kind
        (delta(kind="signature_delta"), delta(kind="signature_delta")),  # not a text
        (delta(), delta(citation={"url": "u"})),  # something beside the text
        (delta(), {"type": "content_block_stop", "index": 0}),
        (delta(), delta(text=None)),
    ]:
        kept = repr(before)
        assert not _joined_anthropic(before, after) and repr(before) == kept

    fields = ("content", "reasoning_content")

    def chunk(delta, finish=None, cid="c1", usage=None, index=0):
        out = {"id": cid, "model": "m", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            out["usage"] = usage
        return out

    held = chunk({"content": "a", "reasoning_content": None})
    assert _joined_chat(held, chunk({"content": "b", "role": None}), fields)  # a key without a value is none
    assert held["choices"][0]["delta"]["content"] == "ab"

    def arguments(text, index=0, **extra):
        return chunk({"tool_calls": [{"index": index, "function": {"arguments": text}, **extra}]})

    held = arguments('{"a"')
    assert _joined_chat(held, arguments(": 1}"), fields)
    assert held["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    for before, after in [
        (chunk({"content": "a"}), chunk({"content": "b"}, finish="stop")),  # the last chunk
        (chunk({"content": "a"}), chunk({"content": "b"}, cid="c2")),  # another reply
        (chunk({"content": "a"}), chunk({"content": "b"}, index=1)),  # another choice
        (chunk({"content": "a"}), chunk({"reasoning_content": "b"})),  # another field
        (chunk({"role": "assistant", "content": ""}), chunk({"content": "b"})),  # the first chunk
        (chunk({"content": "a"}, usage={"prompt_tokens": 1}), chunk({"content": "b"}, usage={"prompt_tokens": 1})),
        (chunk({"content": "a"}), arguments("{")),
        (arguments("{"), arguments("}", index=1)),  # another call
        (arguments(""), arguments("{", id="call_2", type="function")),  # a call's first chunk
        (arguments("{"), chunk({"tool_calls": [{"index": 0, "function": {"name": "ls", "arguments": "}"}}]})),
    ]:
        kept = repr(before)
        assert not _joined_chat(before, after, fields) and repr(before) == kept
