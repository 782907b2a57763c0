"""The HTTP transport under the SDK clients: urllib3's connection pool instead of httpcore.

A streamed reply is hundreds of small reads (a server-sent event every ~40 ms), and
the SDKs' default transport parses each one with h11 in pure Python: ~100 µs of a
worker's CPU per event, more than everything else a turn does with it. urllib3 reads
a chunked body with the standard library's buffered reader (C) and hands over one
chunk per event for a fraction of that (``python -m bench.llm_stream`` prints both).

Everything above the transport stays the SDK's and httpx's: the request, headers,
content decoding, status errors, the SSE parser. What a transport owes httpx is kept:
timeouts from the request (connect and read), failures raised as httpx's own
exceptions (`ConnectError`, `ConnectTimeout`, `ReadTimeout`, `RemoteProtocolError`,
`ReadError`, ...), so the retry rules and error messages see what they saw before, and
the response's socket under ``extensions["network_stream"]``, which the stream pump
shuts down to end a blocked read at once.

A server-sent event stream may be read at a pace (``read_pace``): when nothing is buffered,
the next read waits until ``pace()`` seconds after the last one, so the events that arrive
meanwhile are read in one wake-up instead of one each, and handed up as one piece. A runs
worker streaming hundreds of replies sets it to what its turns can send on anyway
(``Coalescer.read_pace``); each thread's wake-up, not the parsing, is most of a streamed
event's cost there. The run's cancel event (``read_wake``) ends such a wait at once.

HTTP/1.1 only (as the default httpx client); no redirects (the client never follows
them); TLS through httpx's own SSL context. A process whose environment names an HTTP
proxy keeps httpx's default transport, which honours it (`use_for`).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import httpx2
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)

_CHUNK = 64 * 1024

# How long an event stream read on this thread may let its events gather, asked before each
# read that would block (seconds; 0: read at once). Set around a model call by its caller.
read_pace: contextvars.ContextVar[Callable[[], float] | None] = contextvars.ContextVar("read_pace", default=None)
# An event that ends a paced read's wait at once when it is set (a run's cancel event): an
# abort does not wait out the pace.
read_wake: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("read_wake", default=None)


def _sleep(seconds: float, wake: threading.Event | None = None) -> None:
    """A paced read's wait (the tests count them): ``seconds``, or until ``wake`` is set."""
    if wake is None:
        time.sleep(seconds)
    else:
        wake.wait(seconds)


def use_for() -> bool:
    """Whether the shared client may use this transport: not when the environment names a
    proxy (httpx then routes through it; this transport would not)."""
    return not urllib.request.getproxies()


# urllib3's and the socket's failures → the httpx exceptions the SDKs expect; the first match
# wins (NewConnectionError before its base class ConnectTimeoutError).
_ERRORS: tuple[tuple[type | tuple[type, ...], type], ...] = (
    ((NewConnectionError, SSLError), httpx2.ConnectError),
    (ConnectTimeoutError, httpx2.ConnectTimeout),
    (ReadTimeoutError, httpx2.ReadTimeout),
    (ProxyError, httpx2.ProxyError),
    (ProtocolError, httpx2.RemoteProtocolError),
    (HTTPError, httpx2.TransportError),
    (TimeoutError, httpx2.ReadTimeout),
    (OSError, httpx2.ReadError),  # the socket shut down under a read (a cancelled stream), reset, ...
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc) or type(exc).__name__) from exc
        raise


class _NetworkStream:
    """What the stream pump asks of ``extensions["network_stream"]``: the socket."""

    __slots__ = ("_response",)

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def get_extra_info(self, name: str):
        if name != "socket":
            return None
        connection = getattr(self._response, "connection", None)
        return getattr(connection, "sock", None)


class _Body(httpx2.SyncByteStream):
    """The response body as it arrives: one chunk of a chunked body per item (a server-sent
    event is usually one), otherwise whatever one read returns."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        with _httpx_errors():
            if response.chunked:
                pace = read_pace.get()
                chunks = response.read_chunked(decode_content=False)
                if pace is not None and _is_event_stream(response):
                    chunks = _paced(chunks, response, pace)
                for chunk in chunks:
                    if chunk:
                        yield chunk
                return
            read1 = response.read1
            while chunk := read1(_CHUNK, decode_content=False):
                yield chunk

    def close(self) -> None:
        response = self._response
        if response.connection is not None and not response.isclosed():
            response.close()  # unread bytes on the socket: it cannot serve another request
        response.release_conn()


def _is_event_stream(response: urllib3.BaseHTTPResponse) -> bool:
    return (response.headers.get("content-type") or "").startswith("text/event-stream")


class _CountingRaw(io.RawIOBase):
    """The socket as the raw stream under a paced body's reader: ``received`` counts the bytes
    it delivered; ``first`` (what the response's own reader held already) comes first."""

    def __init__(self, sock, first: bytes) -> None:
        super().__init__()
        self._sock, self._first, self.received = sock, first, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._first:
            count = min(len(buffer), len(self._first))
            buffer[:count] = self._first[:count]
            self._first = self._first[count:]
        else:
            count = self._sock.recv_into(buffer)
        self.received += count
        return count


class _CountedReader:
    """A paced body's reader in place of the response's own: it counts what it hands out
    against what its socket delivered, so whether it holds bytes is known without a system
    call. (A look at the socket is one: on a worker of many threads each is a hand-off of the
    interpreter lock, and so a thread switch.) The response's own reader is closed with it."""

    def __init__(self, previous, sock, first: bytes) -> None:
        self._previous = previous
        self._raw = _CountingRaw(sock, first)
        self._reader = io.BufferedReader(self._raw, _CHUNK)
        self._taken = 0

    def holds(self) -> bool:
        return self._raw.received > self._taken

    def readline(self, limit: int = -1) -> bytes:
        line = self._reader.readline(limit)
        self._taken += len(line)
        return line

    def read(self, size: int | None = -1) -> bytes:
        data = self._reader.read(size)
        self._taken += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = self._reader.read1(size)
        self._taken += len(data)
        return data

    def readinto(self, buffer) -> int:
        count = self._reader.readinto(buffer)
        self._taken += count or 0
        return count

    @property
    def closed(self) -> bool:
        return self._reader.closed

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
            self._previous.close()  # the socket's file: the socket closes once its files are

    def __getattr__(self, name: str):
        return getattr(self._reader, name)


def _counted(response: urllib3.BaseHTTPResponse) -> _CountedReader | None:
    """Put a ``_CountedReader`` under ``response`` (between two chunks of its body: what the
    old reader holds moves to the new one), or None when its reader is not a plain buffered
    socket file."""
    holder = getattr(response, "_fp", None)
    reader = getattr(holder, "fp", None)
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is None or type(reader) is not io.BufferedReader:
        return None
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        first = reader.peek(1)  # everything it holds, or what the socket has now (no wait)
    except OSError:  # nothing there (or the socket failed: the next read says which)
        first = b""
    finally:
        sock.settimeout(timeout)
    if first:
        reader.read(len(first))  # now held by the new reader
    counted = holder.fp = _CountedReader(reader, sock, first)
    return counted


def _paced(chunks: Iterator[bytes], response: urllib3.BaseHTTPResponse, pace: Callable[[], float]) -> Iterator[bytes]:
    """``chunks`` with a wait before a read when the reader holds no bytes, until ``pace()``
    after the last wake-up: what came meanwhile is read in one go. The first read is not
    paced (the reply's head and first events). The counting reader goes under the response
    (between two chunks) the first time a wait is due: a pace of 0, a lone stream's, costs
    nothing."""
    reader: _CountedReader | None = None
    woke = None
    wake = read_wake.get()
    while True:
        now = time.monotonic()
        if woke is None:
            woke = now
        else:
            wait = woke + pace() - now
            if wait <= 0:
                woke = now
            else:
                if reader is None:
                    reader = _counted(response)
                    if reader is None:  # not a plain socket: read as it comes
                        yield from chunks
                        return
                if not reader.holds():
                    _sleep(wait, wake)
                    woke = time.monotonic()
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        if reader is not None and reader.holds():
            # What came during the wait goes up as one piece: the layers above take the events
            # of one piece together (``sse.event_groups``), and merge their deltas.
            parts = [chunk]
            while reader.holds():
                try:
                    parts.append(next(chunks))
                except StopIteration:
                    break
            chunk = b"".join(parts)
        yield chunk


class Urllib3Transport(httpx2.BaseTransport):
    def __init__(self, *, max_connections: int = 200, ssl_context=None) -> None:
        self._pool = urllib3.PoolManager(
            num_pools=64,
            maxsize=max_connections,
            block=False,
            ssl_context=ssl_context if ssl_context is not None else httpx2.create_ssl_context(),
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = request.extensions.get("timeout") or {}
        timeout = urllib3.Timeout(connect=timeouts.get("connect"), read=timeouts.get("read"))
        headers = urllib3.HTTPHeaderDict()
        for name, value in request.headers.multi_items():
            headers.add(name, value)
        body = request.read()
        with _httpx_errors():
            response = self._pool.urlopen(
                request.method,
                str(request.url),
                body=body or None,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                decode_content=False,  # httpx decodes the content (it reads content-encoding)
                timeout=timeout,
                assert_same_host=False,
            )
        return httpx2.Response(
            status_code=response.status,
            headers=list(response.headers.items()),
            stream=_Body(response),
            extensions={"http_version": b"HTTP/1.1", "network_stream": _NetworkStream(response)},
        )

    def close(self) -> None:
        self._pool.clear()
