"""Reading an SDK stream so the caller can always stop waiting.

The official SDKs block in a socket read while the server is silent; neither closing
the response nor setting a flag interrupts that. `Pump` makes the SDK call (sending the
request, waiting for the response's head) on one of the process's opening threads, while
the caller waits for its outcome. Once the response is open the caller iterates the SDK's
events itself, on its own thread: no hand-over per event (a thread switch and a GIL
hand-off each, the larger part of the layer's cost per delta). From the call on, the
process's one `_Watcher` thread looks at the cancel events of every pump every
`WATCH_SECONDS` and, for a set one, wakes the caller if it still waits for the head and
shuts the response's socket down, which ends a blocked read at once; the caller then
raises `Cancelled`. So an abort takes effect within ~`WATCH_SECONDS` whatever the network
does, and a waiting caller is woken once, by the outcome or by the abort, not every few
milliseconds to look at its flag.

The opening threads (`_Openers`) are kept for the next calls: a busy runs worker opens
hundreds of streams a minute, and a thread started for each costs its start and its exit.
A call blocked on a silent server holds its thread alone; a new one starts only when none
is free, and one left without work for `IDLE_SECONDS` ends.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

OPENED = object()  # first item: the HTTP response arrived (status 2xx)
_WOKEN = object()  # put by `Pump.interrupt`: the caller stops waiting for the head

WATCH_SECONDS = 0.05  # how often the watcher looks at the pumps' cancel events
IDLE_SECONDS = 60.0  # an opening thread without work this long ends


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
    """One daemon thread per process: interrupts the pumps whose cancel event is set.
    It sleeps while no call is under way, and looks every `WATCH_SECONDS` while some are."""

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


class _Openers:
    """Daemon threads that make the SDK calls, kept for the next ones (the module's doc). Not a
    ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so a call held by a
    silent server would hold up the process's shutdown.

    ``_idle`` counts the threads waiting for a call that no ``submit`` has claimed yet: a
    submit claims one, or starts a thread when there is none, so a queued call always has
    a thread on its way to it. Each call runs in a new, empty context, as on a new thread."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Also in a forked child: the parent's threads are not there, nor its lock's holder.
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = 0

    def submit(self, call: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._calls.put(call)
        if start:
            threading.Thread(target=self._serve, args=(self._calls,), name="neta-llm-open", daemon=True).start()

    def _serve(self, calls: queue.SimpleQueue) -> None:
        while True:
            try:
                call = calls.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # else a submit claimed this thread meanwhile: its call is queued
                        self._idle -= 1
                        return
                continue
            try:
                contextvars.Context().run(call)
            except BaseException:  # the thread serves the next call, whatever this one did
                logger.exception("opening a model stream failed outside its call")
            with self._lock:
                self._idle += 1


_openers = _Openers()
os.register_at_fork(after_in_child=_openers._reset)


class Pump:
    def __init__(self, open_stream: Callable[[], Iterable]) -> None:
        self._open_stream = open_stream
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream = None
        _openers.submit(self._open)

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
        if cancel is None:
            item = self._queue.get()
            if type(item) is _Raised:
                raise item.error
            yield OPENED
            yield from self._stream
            return
        _watcher.watch(self, cancel)
        try:
            if cancel.is_set():
                raise Cancelled
            item = self._queue.get()  # the opening's outcome, or the watcher's wake-up on an abort
            if item is _WOKEN or cancel.is_set():
                raise Cancelled
            if type(item) is _Raised:
                raise item.error
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
        """Wake the caller (any thread): a wait for the head ends, and a read blocked on
        the response ends as its socket is shut down."""
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            interrupt_response(stream)
        self._queue.put(_WOKEN)

    def stop(self) -> None:
        """The caller is done: the response's socket is shut down and the response closed (a
        connection serves one call, as when a helper thread read it), and the opening thread
        will not hand over a response that arrives later."""
        self.interrupt()
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            _close(stream)
