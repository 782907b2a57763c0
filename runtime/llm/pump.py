"""Reading an SDK stream so the caller can always stop waiting.

The official SDKs block in a socket read while the server is silent; neither closing
the response nor setting a flag interrupts that. `Pump` makes the SDK call (sending the
request, waiting for the response's head) on a daemon thread, while the caller waits in
short slices and checks its cancel event in between. Once the response is open the caller
iterates the SDK's events itself, on its own thread: no hand-over per event (a thread
switch and a GIL hand-off each, the larger part of the layer's cost per delta). While it
reads, the process's one `_Watcher` thread looks at the cancel events of every open
stream every `WATCH_SECONDS` and, for a set one, shuts the response's socket down, which
ends the blocked read at once; the caller then raises `Cancelled`. So an abort takes
effect within ~`poll` seconds whatever the network does.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable

OPENED = object()  # first item: the HTTP response arrived (status 2xx)

WATCH_SECONDS = 0.05  # how often the watcher looks at the open streams' cancel events


class Cancelled(Exception):
    """The caller's cancel event was set while waiting."""


class _Raised:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def interrupt_response(stream) -> None:
    """Shut down the socket under an SDK stream so a blocked read returns at once."""
    response = getattr(stream, "response", None)
    extensions = getattr(response, "extensions", None) or {}
    network_stream = extensions.get("network_stream")
    if network_stream is None:
        return
    try:
        sock = network_stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - a transport without sockets: nothing to shut down
        return
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _close(stream) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - closing a broken response
            pass


class _Watcher:
    """One daemon thread per process: interrupts the open streams whose cancel event is set.
    It sleeps while no stream is open, and looks every `WATCH_SECONDS` while some are."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Also in a forked child: a lock the parent's threads held at the fork stays held there.
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watched: dict[Pump, threading.Event] = {}
        self._pid = 0

    def watch(self, pump: Pump, cancel: threading.Event) -> None:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child (the thread stayed behind)
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="neta-llm-cancel", daemon=True).start()
            self._watched[pump] = cancel
            self._wake.notify()

    def unwatch(self, pump: Pump) -> None:
        with self._lock:
            self._watched.pop(pump, None)

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._lock:
                if self._pid != pid:
                    return
                while not self._watched:
                    self._wake.wait()
                cancelled = [pump for pump, cancel in self._watched.items() if cancel.is_set()]
                for pump in cancelled:
                    del self._watched[pump]
            for pump in cancelled:
                pump.interrupt()
            time.sleep(WATCH_SECONDS)


_watcher = _Watcher()
os.register_at_fork(after_in_child=_watcher._reset)


class Pump:
    def __init__(self, open_stream: Callable[[], Iterable], *, poll: float = 0.05) -> None:
        self._open_stream = open_stream
        self._poll = poll
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream = None
        self._thread = threading.Thread(target=self._open, name="neta-llm-stream", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            stream = self._open_stream()
        except BaseException as exc:  # noqa: BLE001 - handed to the reading side
            if not self._stop.is_set():
                self._queue.put(_Raised(exc))
            return
        with self._lock:
            stopped = self._stop.is_set()
            if not stopped:
                self._stream = stream
        if stopped:  # the caller gave up waiting: nobody will read it
            _close(stream)
            return
        self._queue.put(OPENED)

    def items(self, cancel: threading.Event | None):
        """Yield `OPENED`, then the SDK's events; re-raise its error; raise `Cancelled`."""
        get = self._queue.get
        poll = self._poll
        while True:
            if cancel is None:
                item = get()
            else:
                if cancel.is_set():
                    raise Cancelled
                try:
                    item = get(timeout=poll)
                except queue.Empty:
                    continue
            if type(item) is _Raised:
                raise item.error
            break
        if cancel is None:
            yield OPENED
            yield from self._stream
            return
        _watcher.watch(self, cancel)
        try:
            if cancel.is_set():
                raise Cancelled
            yield OPENED
            is_set = cancel.is_set
            for item in self._stream:
                if is_set():
                    raise Cancelled
                yield item
        except Cancelled:
            raise
        except Exception:
            if cancel.is_set():  # the read failed because the watcher shut the socket down
                raise Cancelled from None
            raise
        finally:
            _watcher.unwatch(self)

    def interrupt(self) -> None:
        """Wake a read blocked on the response (any thread): its socket is shut down."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            interrupt_response(stream)

    def stop(self) -> None:
        """The caller is done: the response's socket is shut down and the response closed (a
        connection serves one call, as when a helper thread read it), and the opening thread
        will not hand over a response that arrives later."""
        self.interrupt()
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            _close(stream)
