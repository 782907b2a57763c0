"""Reading an SDK stream on a helper thread, so the caller can always stop waiting.

The official SDKs block in a socket read while the server is silent; neither closing
the response nor setting a flag interrupts that. `Pump` runs the SDK call and its
iteration on a daemon thread and hands the raw events over a queue. The caller waits
on the queue in short slices and checks its cancel event in between, so an abort
takes effect within `poll` seconds whatever the network does; `stop()` then shuts
the response's socket down, which wakes the helper thread so it ends too.
"""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Callable, Iterable

OPENED = object()  # first item: the HTTP response arrived (status 2xx)
_END = object()


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


class Pump:
    def __init__(self, open_stream: Callable[[], Iterable], *, poll: float = 0.05) -> None:
        self._open_stream = open_stream
        self._poll = poll
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream = None
        self._thread = threading.Thread(target=self._run, name="neta-llm-stream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stream = None
        try:
            stream = self._open_stream()
            with self._lock:
                self._stream = stream
            if self._stop.is_set():
                return
            self._queue.put(OPENED)
            for item in stream:
                if self._stop.is_set():
                    return
                self._queue.put(item)
            self._queue.put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the reading side
            if not self._stop.is_set():
                self._queue.put(_Raised(exc))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing a broken response
                    pass

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
            if item is _END:
                return
            if type(item) is _Raised:
                raise item.error
            yield item

    def stop(self) -> None:
        """Tell the helper thread to end and wake it if it is blocked in a read."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            interrupt_response(stream)
