"""Fixtures for the MCP tests: a real MCP server (``mcp_server.py``, the official SDK)
over stdio and over streamable HTTP, saved as ``McpServer`` rows through the service."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolcatalog import catalog_version
from toolcatalog.mcp import catalog as mcp_catalog
from toolcatalog.mcp import connections
from toolcatalog.sandbox import reset_sandbox_probe
from toolcatalog.services import mcp_server_save

SERVER = Path(__file__).with_name("mcp_server.py").resolve()
TESTS = SERVER.parent.parent


def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(autouse=True)
def mcp_clean():
    """Every test starts with no connection, no MCP tool registered, no cached catalog."""
    connections.reset_manager()
    mcp_catalog.forget()
    catalog_version.forget()
    yield
    connections.reset_manager()
    mcp_catalog.forget()
    catalog_version.forget()


@pytest.fixture
def marks(tmp_path, monkeypatch):
    path = tmp_path / "marks"
    path.mkdir()
    monkeypatch.setenv("MCP_TEST_MARKS", str(path))
    return path


@pytest.fixture
def no_sandbox(settings):
    settings.NETA_SANDBOX = "none"
    reset_sandbox_probe()
    yield
    reset_sandbox_probe()


@pytest.fixture
def stdio_server(db, marks, no_sandbox):
    """``McpServer`` 'demo' over stdio (no sandbox: the hang marker is written to the test's
    directory), discovered on save."""

    def make(name: str = "demo", **fields):
        fields = {
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(SERVER), "stdio"],
            "env_names": ["MCP_TEST_MARKS", "MCP_TEST_TOKEN"],
            "read_only_paths": [str(TESTS)],
            "connect_timeout": 60.0,
            "agents": ["*"],
            **fields,
        }
        return mcp_server_save(actor=None, name=name, **fields)

    return make


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    """The test server over streamable HTTP on a free port (one per module)."""
    port = _free_port()
    marks = tmp_path_factory.mktemp("http-marks")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MCP_TEST_MARKS": str(marks)},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("the HTTP MCP test server exited") from None
                time.sleep(0.1)
        else:
            raise RuntimeError("the HTTP MCP test server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
