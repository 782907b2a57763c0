"""Django's ASGI handler on a fixed set of request threads; the sockets' database thread.

Django runs a request's synchronous code (middleware that is sync only, the
view) in a thread of the request's own: its ASGI handler opens a
``ThreadSensitiveContext`` per request, and asgiref starts a new thread for
each. Every request therefore paid for a thread start and a new database
connection (Django's connections are per thread), ~2–3 ms of CPU on SQLite, and
connections could not be kept (``NETA_DB_CONN_MAX_AGE`` would pile them up in
threads that are gone).

``PooledASGIHandler`` gives each request one of ``NETA_HTTP_THREADS`` executors
of one thread each instead (``ThreadSensitiveContext(executor=…)``, asgiref's way
to name the thread): the threads stay, keep their connections
(``infra.db_threads``), and a request waits for a free one when all are busy.
Requests still never share a thread at the same time, so what Django keeps per
thread (the connection, an open transaction) is the request's alone while it runs.

Its middleware chain is built synchronous and runs, with the view, in one call on
the request's thread (``get_response_async``). Django's asynchronous chain runs
each sync-only middleware's request and response halves as calls of their own on
that thread (the built-in middleware are all sync-only: ~14 hand-offs between the
event loop and the thread a request, each a future, a wake-up and the GIL passed
twice); the work done is the same, in one hand-off.

A response that says ``frees_thread = True`` (the OpenAI endpoints' answers, which follow a
run for as long as it takes: runtime/openai_api/) gives its request's thread back once its view
has returned: its ``prepare()`` coroutine, if it has one, and its async body then run on the
event loop without holding one of the ``NETA_HTTP_THREADS`` (their database reads go through a
pool of their own). So a hundred clients streaming answers at once leave the threads to other
requests. ``prepare()`` is awaited before the response starts: it may still set the status,
the headers and the content. A client that disconnects meanwhile cancels it, as Django cancels
a streaming body.

Websockets' database calls run on asgiref's one process-wide thread (channels'
``database_sync_to_async``); ``keep_socket_connections`` makes it keep its
connection too (channels closed and reopened it around every call: each heartbeat
and rights check paid for a new connection).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

from infra import db_threads


class _ExecutorPool:
    """Executors handed out one per request, on the server's event loop (no locks: one
    loop uses it; a waiter cancelled after it was handed one gives it back)."""

    def __init__(self, size: int, name: str):
        self.size = size
        self._name = name
        self._free: list[ThreadPoolExecutor] = []
        self._made = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    async def acquire(self) -> ThreadPoolExecutor:
        if self._free and not self._waiters:
            return self._free.pop()
        if self._made < self.size and not self._waiters:
            self._made += 1  # threads start on first use: a quiet process has few
            return db_threads.executor(f"{self._name}-{self._made}")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())
            raise

    def release(self, executor: ThreadPoolExecutor) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(executor)
                return
        self._free.append(executor)

    def busy(self) -> int:
        return self._made - len(self._free)


# The executor the current request holds (a one-item list: emptied once given back).
_held: contextvars.ContextVar[list | None] = contextvars.ContextVar("neta_http_thread", default=None)


class PooledASGIHandler(ASGIHandler):
    """``ASGIHandler`` whose requests run their sync code on ``threads`` reused threads."""

    def __init__(self, threads: int):
        super().__init__()
        self.load_middleware(is_async=False)  # the chain, synchronous (see the module doc)
        self.threads = _ExecutorPool(threads, "neta-http")

    async def get_response_async(self, request):
        """The middleware chain and the view, in one call on the request's thread (Django's
        ``BaseHandler.get_response``: the URL conf set, the request closed with the
        response, responses of 400 and up logged)."""
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = await self.threads.acquire()
        held = [executor]
        token = _held.set(held)
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            _held.reset(token)
            if held:
                self.threads.release(held.pop())

    async def send_response(self, response, send):
        """A response that ``frees_thread`` gives the request's thread back first, then
        ``prepare()`` runs (on the loop), then the response goes out as any other."""
        if getattr(response, "frees_thread", False):
            held = _held.get()
            if held:
                self.threads.release(held.pop())
            prepare = getattr(response, "prepare", None)
            if prepare is not None:
                await prepare()
        await super().send_response(response, send)


def keep_socket_connections() -> None:
    """Websockets' database calls (``database_sync_to_async``: rights checks, heartbeats,
    commands) run on asgiref's one process-wide thread: it keeps its connections too."""
    SyncToAsync.single_thread_executor.submit(db_threads.keep_connections)
