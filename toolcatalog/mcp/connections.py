"""The per-process MCP connection manager.

An MCP client session is asynchronous and long-lived; Neta's tools are synchronous calls
made by a turn's thread (the inline backend's pool in the web process, a Celery worker
process, a subagent host answering a child's ``proxy_request``). So each process that runs
MCP tools keeps **one manager**: a daemon thread running an asyncio loop, and on it one
connection per server, each owned by one task that holds the SDK's ``Client`` open
(``async with`` entered and left in that task, as anyio requires). A tool call from any
thread is a coroutine submitted to that loop; the calling thread waits for it while
watching the run's cancel signal, and cancelling the coroutine makes the SDK send the
server ``notifications/cancelled``.

* **Lazy**: nothing starts until a process lists or calls a server's tools. The manager
  is created on first use and again after a ``fork`` (a Celery prefork child never
  inherits its parent's loop thread).
* **Restart with backoff**: when a server's connection ends without being asked to (a
  stdio server that crashed, an HTTP server that went away), the call in flight gets an
  error result, the crash is counted and reported (``on_event``: the service records it
  on the row, the console's health shows it) and the connection is started again after
  0.5 s, 1 s, 2 s … (at most 30 s); a call that arrives meanwhile waits for the restart
  when it comes within the server's connect timeout, else it is refused with the reason.
* **stdio servers** get a scrubbed environment (Neta's secrets removed, the row's named
  variables passed through), their own session and process group (the SDK starts them
  with ``start_new_session``), die with the server process (``setpriv --pdeathsig``),
  and run under bubblewrap when the effective sandbox is ``bwrap`` (the same argv as
  ``bash``: no host ``/proc``, no project directory, no network unless the row allows it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.cpu_affinity import unpin_thread
from toolcatalog.environment import scrub_environment
from toolcatalog.mcp.specs import ServerSpec
from toolcatalog.protected_paths import confined_protected, read_only_path_problem
from toolcatalog.sandbox import SANDBOX_HOME, _pdeathsig_prefix, bwrap_argv, effective_sandbox

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
STDERR_TAIL = 2000
CANCEL_POLL = 0.05


class McpUnavailable(Exception):
    """The server cannot be reached now (not started, crashed and restarting, timed out)."""


class McpCallCancelled(Exception):
    """The caller's cancel signal fired during the call."""


@dataclass
class ServerState:
    """What this process knows about one server (the console and health read it)."""

    name: str
    status: str = "idle"  # idle | connecting | connected | restarting | failed | stopped
    tools: int = 0
    last_error: str = ""
    last_error_at: float | None = None
    restarts: int = 0
    connected_at: float | None = None
    next_attempt_in: float | None = None
    server_info: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "tools": self.tools,
            "lastError": self.last_error,
            "lastErrorAt": self.last_error_at,
            "restarts": self.restarts,
            "connectedAt": self.connected_at,
            "serverInfo": self.server_info,
            "pid": os.getpid(),
        }


def tool_to_dict(tool: Any) -> dict[str, Any]:
    data = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {key: data[key] for key in ("name", "title", "description", "inputSchema", "annotations") if key in data}


def _stdio_transport(spec: ServerSpec, errlog):
    """The SDK's stdio transport for ``spec``: scrubbed environment, parent-death signal,
    bubblewrap when the sandbox is on."""
    from mcp.client.stdio import (  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)
        StdioServerParameters,
        stdio_client,
    )

    env = scrub_environment(os.environ, passthrough=spec.env_names, defaults={})
    command = spec.resolved_command()
    argv = [command, *spec.args]
    cwd: str | None = None
    if effective_sandbox().mode == "bwrap":
        env["HOME"] = SANDBOX_HOME
        refused = [problem for p in spec.read_only_paths if (problem := read_only_path_problem(p))]
        if refused:  # a row stored before the rule: nothing of it is shown
            raise McpUnavailable(f"MCP server '{spec.name}': read_only_paths refused: {'; '.join(refused)}")
        argv = bwrap_argv(
            roots=(), cwd=Path("/tmp"), network=spec.network, command=argv,
            ro_binds=(*program_dirs(command), *spec.read_only_paths), protected=confined_protected(),
        )  # fmt: skip
    else:
        cwd = tempfile.gettempdir()
    argv = [*_pdeathsig_prefix(), *argv]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
    return stdio_client(params, errlog=errlog)


def program_dirs(command: str) -> list[str]:
    """What of the program must be visible in the sandbox: its directory and, for a program
    in a ``bin/`` directory (a virtualenv, a Python or Node installation), that prefix,
    both for the path given and the one its symlinks lead to."""
    out: list[str] = []
    for path in dict.fromkeys((command, os.path.realpath(command))):
        directory = os.path.dirname(path)
        out.append(directory)
        if os.path.basename(directory) == "bin":
            out.append(os.path.dirname(directory))
    return list(dict.fromkeys(out))


def _http_transport(spec: ServerSpec):
    from mcp.client.streamable_http import (
        streamable_http_client,  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)
    )

    from toolcatalog.models import (
        http_url_problem,  # the guard's rules live with the row (models); read at connection time, after the apps are ready
    )

    problem = http_url_problem(spec.url)
    if problem:  # checked again at each connection: a row stored earlier, or a name that moved
        raise McpUnavailable(f"MCP server '{spec.name}': {problem}")

    return streamable_http_client(spec.url)


@contextlib.asynccontextmanager
async def _watched(inner, on_closed: Callable[[], None]):
    """``inner``'s streams, with a relay on the read side that calls ``on_closed`` when the
    server's side ends (EOF on a crashed stdio server's stdout, a dropped HTTP stream)."""
    import anyio  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)

    async with inner as (read, write):
        relay_send, relay_recv = anyio.create_memory_object_stream(0)

        async def pump() -> None:
            try:
                async with relay_send:
                    async for item in read:
                        await relay_send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                on_closed()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield relay_recv, write
            finally:
                group.cancel_scope.cancel()


class _Connection:
    def __init__(self, manager: McpConnections, spec: ServerSpec) -> None:
        self.manager = manager
        self.spec = spec
        self.state = ServerState(name=spec.name)
        self.client = None
        self.tools: list[dict[str, Any]] = []
        self.lock = asyncio.Lock()
        self.task: asyncio.Task | None = None
        self.ready: asyncio.Event | None = None
        self.wake: asyncio.Event | None = None
        self.stopping = False
        self.crashes_in_row = 0
        self.next_attempt = 0.0
        self.restart_handle: asyncio.TimerHandle | None = None
        self.errlog = None
        self.start_error: BaseException | None = None

    # --- the owner task ---------------------------------------------------------

    def _on_closed(self) -> None:
        if self.wake is not None and not self.stopping:
            self.wake.set()

    async def _on_message(self, message: Any) -> None:
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method == "notifications/tools/list_changed":
            asyncio.get_running_loop().create_task(self._relist())

    async def _listen(self, client) -> None:
        """Protocol 2026-07-28 delivers tools/list_changed on a ``subscriptions/listen``
        stream; older servers send the notification itself (``_on_message``)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    await self._relist()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - older protocol (no listen), or the stream dropped
            logger.debug("MCP server %r: no subscriptions/listen stream (%s)", self.spec.name, _describe(exc))

    async def _relist(self) -> None:
        client = self.client
        if client is None:
            return
        try:
            tools = await asyncio.wait_for(_list_all(client), self.spec.connect_timeout)
        except Exception as exc:  # noqa: BLE001 - reported, never raised into the loop
            self._error(f"listing tools after tools/list_changed failed: {_describe(exc)}")
            return
        self.tools = tools
        self.state.tools = len(tools)
        self.manager._emit(self.spec.name, "tools", tools=tools)

    async def _own(self) -> None:
        from mcp import Client  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)

        transport = None
        try:
            if self.spec.transport == "stdio":
                if self.errlog is not None:
                    self.errlog.close()  # the previous start's
                self.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
                transport = _stdio_transport(self.spec, self.errlog)
            else:
                transport = _http_transport(self.spec)
            async with Client(_watched(transport, self._on_closed), message_handler=self._on_message, cache=None) as client:
                tools = await _list_all(client)
                self.client = client
                self.tools = tools
                info = client.server_info
                self.state.server_info = f"{info.name} {info.version}".strip() if info is not None else ""
                self.ready.set()
                listener = asyncio.get_running_loop().create_task(self._listen(client))
                try:
                    await self.wake.wait()
                finally:
                    listener.cancel()
                    with contextlib.suppress(BaseException):
                        await listener
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - recorded for whoever waits on ready
            self.start_error = exc
        finally:
            self.client = None
            self.ready.set()
            if not self.stopping:
                self._lost()

    def _stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0, os.SEEK_END)
            size = self.errlog.tell()
            self.errlog.seek(max(0, size - STDERR_TAIL))
            return self.errlog.read().strip()
        except (OSError, ValueError):
            return ""

    def _lost(self) -> None:
        """The connection ended without being asked to: count it, report it, restart later."""
        was_up = self.state.status == "connected"
        if not was_up:
            return  # a start that failed: ensure() reports it
        self.crashes_in_row += 1
        restarts = self.state.restarts + 1
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.crashes_in_row - 1))
        self.next_attempt = time.monotonic() + delay
        tail = self._stderr_tail()
        why = f"the server closed the connection (crashed?); restart #{restarts} in {delay:g} s"
        if tail:
            why += f"; its stderr ends: {tail[-500:]}"
        self.state.status = "restarting"
        # The reason before the count: another thread reading the state (the health page) that
        # sees the restart sees why.
        self.state.last_error, self.state.last_error_at = why, time.time()
        self.state.restarts = restarts
        self._error(why)
        loop = asyncio.get_running_loop()
        self.restart_handle = loop.call_later(delay, lambda: loop.create_task(self._restart_quietly()))

    async def _restart_quietly(self) -> None:
        if self.stopping or self.manager._conns.get(self.spec.name) is not self:
            return
        with contextlib.suppress(Exception):
            await self.ensure()

    def _error(self, message: str) -> None:
        self.state.last_error = message
        self.state.last_error_at = time.time()
        logger.warning("MCP server %r: %s", self.spec.name, message)
        self.manager._emit(self.spec.name, "error", error=message, restarts=self.state.restarts)

    # --- what callers use ------------------------------------------------------

    async def ensure(self):
        """The connected client, starting (or restarting) the server if needed."""
        async with self.lock:
            if self.client is not None and self.wake is not None and not self.wake.is_set():
                return self.client
            if self.stopping:
                raise McpUnavailable(f"MCP server {self.spec.name!r} is stopped")
            wait = self.next_attempt - time.monotonic()
            if wait > 0:
                if wait > self.spec.connect_timeout:
                    raise McpUnavailable(
                        f"MCP server {self.spec.name!r} is restarting after a failure (next attempt in {wait:.0f} s): {self.state.last_error}"
                    )
                await asyncio.sleep(wait)
            await self._stop_task()
            self.state.status = "connecting"
            self.ready, self.wake = asyncio.Event(), asyncio.Event()
            self.start_error = None
            self.task = asyncio.get_running_loop().create_task(self._own())
            try:
                await asyncio.wait_for(self.ready.wait(), self.spec.connect_timeout)
            except asyncio.TimeoutError:
                await self._stop_task()
                self._failed(f"no answer within {self.spec.connect_timeout:g} s (connect timeout)")
            if self.client is None:
                self._failed(_describe(self.start_error) if self.start_error else "the connection ended during start-up")
            self.state.status = "connected"
            self.state.connected_at = time.time()
            self.state.tools = len(self.tools)
            self.state.next_attempt_in = None
            self.manager._emit(self.spec.name, "connected", tools=self.tools)
            return self.client

    def _failed(self, why: str):
        tail = self._stderr_tail()
        if tail:
            why += f"; its stderr ends: {tail[-500:]}"
        self.crashes_in_row += 1
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (self.crashes_in_row - 1))
        self.next_attempt = time.monotonic() + delay
        self.state.status = "failed"
        message = f"MCP server {self.spec.name!r} could not start: {why}"
        self._error(message)  # the same words the caller records: whichever write lands last
        raise McpUnavailable(message)

    async def _stop_task(self) -> None:
        task, self.task = self.task, None
        if task is None or task.done():
            return
        stopping, self.stopping = self.stopping, True  # a deliberate stop is no crash
        try:
            if self.wake is not None:
                self.wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), 5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        finally:
            self.stopping = stopping

    async def close(self) -> None:
        self.stopping = True
        if self.restart_handle is not None:
            self.restart_handle.cancel()
        await self._stop_task()
        self.state.status = "stopped"
        if self.errlog is not None:
            self.errlog.close()
            self.errlog = None

    async def call(self, tool: str, arguments: dict[str, Any]):
        from mcp.shared.exceptions import (
            MCPError,  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)
        )

        client = await self.ensure()
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=self.spec.call_timeout)
        except MCPError as exc:
            if exc.code == -32000 or (self.wake is not None and self.wake.is_set()):  # CONNECTION_CLOSED
                raise McpUnavailable(
                    f"MCP server {self.spec.name!r} closed the connection during the call (it is restarted): {exc.error.message}"
                ) from exc
            raise
        self.crashes_in_row = 0  # a call that completed: the next crash starts the backoff over
        return result


async def _list_all(client) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor = None
    for _page in range(100):
        result = await client.list_tools(cursor=cursor)
        tools += [tool_to_dict(t) for t in result.tools]
        cursor = result.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in _leaves(exc)]
        if leaves:
            return "; ".join(_describe(e) for e in leaves[:3])
    message = getattr(getattr(exc, "error", None), "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _leaves(group: BaseExceptionGroup):
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


class McpConnections:
    """One per process (:func:`manager`). Thread-safe; every public method is synchronous."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()
        self._conns: dict[str, _Connection] = {}
        #: ``on_event(server, kind, **data)``, run on a worker thread (never the loop):
        #: kinds ``connected`` (tools=…), ``tools`` (tools=…, after tools/list_changed),
        #: ``error`` (error=…, restarts=…). The service layer records them on the rows.
        self.on_event: Callable[..., None] | None = None
        self._events = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-events")

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._started:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    unpin_thread()  # it starts the stdio servers: they get every CPU (infra/cpu_affinity.py)
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="mcp-connections", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def _emit(self, server: str, kind: str, **data: Any) -> None:
        if self.on_event is None:
            return

        def deliver() -> None:
            try:
                self.on_event(server, kind, **data)
            except Exception:  # noqa: BLE001 - a recording failure must not stop the connection
                logger.exception("recording MCP event %s of %r failed", kind, server)

        self._events.submit(deliver)

    def _run(self, coro, *, cancel=None, timeout: float | None = None):
        """Run ``coro`` on the loop; wait, watching ``cancel`` (the run's signal)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=CANCEL_POLL if cancel is not None else (None if deadline is None else max(0.0, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise McpCallCancelled("cancelled") from None
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise McpUnavailable(f"no answer within {timeout:g} s") from None

    async def _conn(self, spec: ServerSpec) -> _Connection:
        conn = self._conns.get(spec.name)
        if conn is not None and conn.spec != spec:
            await conn.close()
            conn = None
        if conn is None:
            conn = self._conns[spec.name] = _Connection(self, spec)
        return conn

    def list_tools(self, spec: ServerSpec, *, fresh: bool = True) -> list[dict[str, Any]]:
        """The server's tools (a new connection when ``fresh``: a save or a Refresh button)."""

        async def go():
            conn = await self._conn(spec)
            if fresh:
                await conn.close()
                conn = self._conns[spec.name] = _Connection(self, spec)
            await conn.ensure()
            return list(conn.tools)

        return self._run(go(), timeout=spec.connect_timeout + 10)

    def call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any], *, cancel=None):
        """``tools/call`` on ``spec``'s server: the SDK's ``CallToolResult``. Raises
        ``McpUnavailable``, ``McpCallCancelled`` or the SDK's ``MCPError``."""

        async def go():
            conn = await self._conn(spec)
            return await conn.call(tool, arguments)

        return self._run(go(), cancel=cancel, timeout=spec.connect_timeout + spec.call_timeout + 10)

    def states(self) -> dict[str, dict[str, Any]]:
        return {name: conn.state.to_dict() for name, conn in list(self._conns.items())}

    def stop(self, name: str) -> None:
        if self._loop is None or name not in self._conns:
            return

        async def go():
            conn = self._conns.pop(name, None)
            if conn is not None:
                await conn.close()

        self._run(go(), timeout=15)

    def shutdown(self) -> None:
        """Stop every server and the loop (tests; a process exiting needs nothing: the
        servers die with it)."""
        if self._loop is None:
            return
        for name in list(self._conns):
            with contextlib.suppress(Exception):
                self.stop(name)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None
        self._events.shutdown(wait=True)


_manager: McpConnections | None = None
_manager_lock = threading.Lock()
_on_event: Callable[..., None] | None = None


def set_event_handler(handler: Callable[..., None] | None) -> None:
    """Who records the managers' events (``toolcatalog.services``, from the app's ``ready``)."""
    global _on_event
    _on_event = handler
    if _manager is not None:
        _manager.on_event = handler


def manager() -> McpConnections:
    """This process's manager, created on first use."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = McpConnections()
            _manager.on_event = _on_event
        return _manager


def reset_manager() -> None:
    """Stop this process's servers and forget the manager (tests)."""
    global _manager
    with _manager_lock:
        current, _manager = _manager, None
    if current is not None:
        current.shutdown()


def _after_fork() -> None:
    # A forked child (Celery prefork) has no loop thread: start over on first use.
    global _manager, _manager_lock
    _manager = None
    _manager_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)

