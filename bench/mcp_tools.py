"""What an MCP tool call costs: the connection manager against the tests' SDK server.

Run: ``.venv/bin/python -m bench.mcp_tools`` (from the repository root). Prints figures,
never asserts. Measured here, for a stdio server with ``NETA_SANDBOX=none`` and ``bwrap``
and for the same server over streamable HTTP:

* cold start: starting (or reaching) the server, the handshake and ``tools/list``;
* a warm ``echo`` call through ``run_tool`` (validation, the loop hop, the SDK, the
  conversion): median and p95 of 200 calls, against the ``ls`` builtin on the same machine;
* restart after a crash: from the crashing call's error to the next call answered.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
django.setup()

import logging  # noqa: E402

from django.conf import settings  # noqa: E402

logging.getLogger("httpx2").setLevel(logging.WARNING)  # one INFO line per HTTP request otherwise

from toolcatalog.mcp import connections  # noqa: E402
from toolcatalog.mcp.catalog import McpTool  # noqa: E402
from toolcatalog.mcp.specs import ServerSpec  # noqa: E402
from toolcatalog.protocol import ToolContext, get_tool, run_tool  # noqa: E402
from toolcatalog.sandbox import bwrap_status, reset_sandbox_probe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "mcp_server.py"
CALLS = 200
connections.set_event_handler(None)  # nothing recorded: the bench has no McpServer rows


def figures(label: str, spec: ServerSpec, root: Path) -> None:
    connections.reset_manager()
    started = time.monotonic()
    tools = connections.manager().list_tools(spec)
    cold = time.monotonic() - started
    echo = McpTool(spec, next(t for t in tools if t["name"] == "echo"), agents=())
    ctx = ToolContext(roots=(root,), sandbox="none")
    times = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        result = run_tool(echo, ctx, {"text": "x"})
        times.append(time.perf_counter() - t0)
        assert not result.is_error, result
    times.sort()
    print(f"{label:<16} cold start + list {cold * 1000:7.0f} ms | warm call median {statistics.median(times) * 1000:6.2f} ms, p95 {times[int(len(times) * 0.95)] * 1000:6.2f} ms")
    if spec.transport == "stdio":
        crash = McpTool(spec, next(t for t in tools if t["name"] == "crash"), agents=())
        run_tool(crash, ctx, {})
        t0 = time.monotonic()
        while run_tool(echo, ctx, {"text": "x"}).is_error:
            time.sleep(0.05)
        print(f"{'':<16} crash → next answered call {(time.monotonic() - t0) * 1000:7.0f} ms (backoff 0.5 s + a new server)")
    connections.reset_manager()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ls = get_tool("ls")
        ctx = ToolContext(roots=(root,), sandbox="none")
        times = []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            run_tool(ls, ctx, {})
            times.append(time.perf_counter() - t0)
        print(f"{'builtin ls':<16} {'':>25} | warm call median {statistics.median(times) * 1000:6.2f} ms")
        stdio = ServerSpec(name="bench", transport="stdio", command=sys.executable, args=(str(SERVER), "stdio"), connect_timeout=120, read_only_paths=(str(ROOT / "tests"),))
        for mode in ("none", "bwrap"):
            if mode == "bwrap" and not bwrap_status().available:
                print(f"stdio bwrap: skipped ({bwrap_status().reason})")
                continue
            settings.NETA_SANDBOX = mode
            reset_sandbox_probe()
            figures(f"stdio ({mode})", stdio, root)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            figures("http", ServerSpec(name="bench", transport="http", url=f"http://127.0.0.1:{port}/mcp", connect_timeout=60), root)
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
