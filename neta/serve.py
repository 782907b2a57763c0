"""Serve Neta with Daphne: ``python -m neta.serve [daphne options] neta.asgi:application``.

Daphne's own command with one change: its websocket size limits (Daphne and
autobahn drop a connection whose message exceeds them, 1 MiB by default, before
the application sees anything) are raised to ``DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE``
(4 × ``NETA_WS_MAX_FRAME_BYTES``). A frame over ``NETA_WS_MAX_FRAME_BYTES`` but
under that bound reaches the gateway, which answers ``frame_too_large`` and keeps
the socket open; only a frame over the bound closes it (1009, "message too big").
Options given on the command line win. ``manage.py runserver`` (Daphne's) reads
the same settings.

Second change: API request bodies over their limit (``neta.body_limit``) are
refused with 413 as they arrive. Daphne (Twisted) buffers a whole body before the
application sees the request, so an ASGI middleware alone would answer a 300 MB
import only once all of it had arrived; here a ``Content-Length`` over the limit
is answered right after the headers, and a chunked body as soon as it is over;
the connection is then closed.

A request line over 16 KiB is answered 414 and headers over 16 KiB 431 (JSON for the
API), where Twisted would drop the connection or answer a bare 400
(``install_long_line_answers``). Third: Twisted does not parse POST form fields Daphne never reads
(``install_no_form_parsing``), and autobahn does not style the arguments of debug lines
it drops (``install_quiet_autobahn``). Fourth: the garbage collector is set for a server
once the application is built (``infra.gc_tuning``). Fifth: the embedded server's
threads share one CPU (``infra.cpu_pin``, ``NETA_WEB_CPU``).

Each function imports what it patches when it runs: this module is imported before Django
is set up (``main`` sets ``DJANGO_SETTINGS_MODULE``), and Twisted's modules before Daphne has
installed its asyncio reactor would install Twisted's default one.
"""

from __future__ import annotations

import os
import sys


def daphne_argv(argv: list[str]) -> list[str]:
    """Daphne's arguments: the configured websocket limits, then ``argv`` (later options win)."""
    from django.conf import settings  # Django is set up by main()

    return [
        "--websocket-max-message-size",
        str(settings.DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE),
        "--websocket-max-frame-size",
        str(settings.DAPHNE_WEBSOCKET_MAX_FRAME_SIZE),
        *argv,
    ]


class _Discard:
    def write(self, data) -> None:
        pass

    def seek(self, *args) -> None:
        pass

    def close(self) -> None:
        pass


def install_body_limits() -> None:
    """Count API request bodies in Daphne's request as they arrive (see the module doc)."""
    from daphne.http_protocol import WebRequest  # Daphne installs its reactor first (module doc)

    from neta.body_limit import body_limit, refusal  # needs Django's settings: set up by main()

    if getattr(WebRequest, "_neta_body_limits", False):
        return
    got_length, content_chunk = WebRequest.gotLength, WebRequest.handleContentChunk

    def refuse(self) -> None:
        self._neta_refused = True
        self.content = _Discard()
        self.channel.transport.write(refusal(self._neta_limit, self._neta_path))
        self.channel.loseConnection()

    def gotLength(self, length):
        path = (getattr(self.channel, "_path", b"") or b"").split(b"?", 1)[0].decode("latin-1")
        self._neta_limit, self._neta_received, self._neta_refused, self._neta_path = body_limit(path), 0, False, path
        got_length(self, length)
        if self._neta_limit is not None and length is not None and length > self._neta_limit:
            refuse(self)

    def handleContentChunk(self, data):
        if self._neta_refused:
            return
        self._neta_received += len(data)
        if self._neta_limit is not None and self._neta_received > self._neta_limit:
            refuse(self)
            return
        content_chunk(self, data)

    def process(self):
        if getattr(self, "_neta_refused", False):
            return  # answered already; the connection is closing
        return process_request(self)

    process_request = WebRequest.process
    WebRequest.gotLength, WebRequest.handleContentChunk, WebRequest.process = gotLength, handleContentChunk, process
    WebRequest._neta_body_limits = True


def install_long_line_answers() -> None:
    """Twisted drops a connection whose request line is longer than 16 KiB without a word, and
    answers headers over 16 KiB in all with a bare 400. Here the first is answered ``414 URI Too
    Long``, the second ``431 Request Header Fields Too Large``, with the API's JSON error for
    ``/api/`` paths (``neta.body_limit.line_refusal``), then the connection is closed."""
    from twisted.web.http import HTTPChannel  # Daphne installs its reactor first (module doc)

    from neta.body_limit import line_refusal  # needs Django's settings: set up by main()

    if getattr(HTTPChannel, "_neta_long_lines", False):
        return
    line_received = HTTPChannel.lineReceived

    def answer(channel, status: int, start: bytes) -> None:
        channel.transport.write(line_refusal(status, start))
        channel.loseConnection()
        channel.dataReceived = channel.lineReceived = _ignore

    def lineLengthExceeded(self, line):
        if getattr(self, "_HTTPChannel__first_line", 0):
            answer(self, 414, bytes(line[:64]))
        else:
            answer(self, 431, getattr(self, "_path", b"") or b"")

    def lineReceived(self, line):
        if not getattr(self, "_HTTPChannel__first_line", 0) and self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            answer(self, 431, getattr(self, "_path", b"") or b"")
            return None
        return line_received(self, line)

    HTTPChannel.lineLengthExceeded, HTTPChannel.lineReceived = lineLengthExceeded, lineReceived
    HTTPChannel._neta_long_lines = True


def _ignore(*args) -> None:
    return None


def install_no_form_parsing() -> None:
    """Twisted reads every POST's form fields into ``request.args`` before Daphne sees the
    request; Daphne never uses them (Django parses bodies itself). The parse cost ~4 % of
    the web process's CPU under a load of prompts (the ``email`` package's header registry
    for each ``Content-Type``), parsed a multipart upload a second time, and answered a
    malformed multipart body with its own empty 400 instead of the API's error. Off."""
    from daphne.http_protocol import WebRequest  # Daphne installs its reactor first (module doc)

    if getattr(WebRequest, "_neta_no_form_parsing", False):
        return
    init = WebRequest.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False

    WebRequest.__init__ = __init__
    WebRequest._neta_no_form_parsing = True


def install_quiet_autobahn() -> None:
    """autobahn styles the arguments of its per-frame debug lines (``hltype``/``hlval``:
    a qualified name and ANSI colours through ``click``, four calls a frame) before it
    knows the line is dropped: ~8 % of the event loop's CPU when it streams to many
    sockets. Unless its log level is debug, those arguments are passed as they are."""
    import txaio  # Daphne installs its reactor first (module doc)

    txaio.use_twisted()
    if txaio.get_global_log_level() in ("debug", "trace"):
        return
    from autobahn.websocket import protocol  # Daphne installs its reactor first (module doc)

    protocol.hltype = protocol.hlval = _as_is


def _as_is(value, *args, **kwargs):
    return value


def serve_tuned_gc() -> None:
    """Build the application now (Daphne then finds it imported) and tune the collector
    around what it left alive (``infra.gc_tuning``)."""
    import neta.asgi  # noqa: F401 - Django set up, the application built
    from infra.gc_tuning import tune  # after the application is built (the heap it freezes)

    tune()


def serve_pinned() -> None:
    """Pin the process's threads to one CPU (``infra.cpu_pin``); a bad ``NETA_WEB_CPU`` ends
    the start with its message."""
    from infra.cpu_pin import pin  # after the application is built

    try:
        pin()
    except ValueError as exc:
        sys.exit(f"neta.serve: {exc}")


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
    from daphne.cli import CommandLineInterface  # Daphne installs its reactor first (module doc)

    install_body_limits()
    install_long_line_answers()
    install_no_form_parsing()
    install_quiet_autobahn()
    serve_tuned_gc()
    serve_pinned()
    CommandLineInterface().run(daphne_argv(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
