"""Fixtures for the tool catalog: real temp workspaces, a directory outside them, contexts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.services import require
from tests.toolcatalog.helpers import SECRET
from toolcatalog.protocol import ToolContext, ToolResult, get_tool, run_tool
from toolcatalog.sandbox import bwrap_status, cgroup_support


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    """A directory next to the workspace holding a secret file; tools must never reach it."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET + "\n")
    return out


@pytest.fixture
def output_dir(tmp_path) -> Path:
    return tmp_path / "tool-output"


@pytest.fixture
def ctx(workspace, output_dir) -> ToolContext:
    return ToolContext(roots=(workspace,), sandbox="none", output_dir=output_dir)


@pytest.fixture
def call(ctx):
    """call(name, **args) runs a tool through run_tool in the default context."""

    def _call(name: str, _ctx: ToolContext | None = None, **args) -> ToolResult:
        return run_tool(get_tool(name), _ctx or ctx, args)

    return _call


@pytest.fixture(scope="session")
def bwrap_ok() -> None:
    status = bwrap_status()
    require(status.available, f"bubblewrap not usable here: {status.reason}")


@pytest.fixture(scope="session")
def cgroups_ok() -> None:
    support = cgroup_support()
    require(support.v2_base is not None or support.v1_pids_base is not None,
            f"no writable cgroup for per-run containment: {support.reason}")


@pytest.fixture(scope="session")
def pids_limit_ok() -> None:
    support = cgroup_support()
    require(support.v2_pids or support.v1_pids_base is not None,
            "no pids cgroup here: a fork bomb could not be capped, so it is not run")


@pytest.fixture
def bwrap_ctx(bwrap_ok, workspace, output_dir) -> ToolContext:
    return ToolContext(roots=(workspace,), sandbox="bwrap", output_dir=output_dir)
