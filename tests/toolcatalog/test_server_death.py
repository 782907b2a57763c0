"""Commands die with the server: kill -9 the process running ``bash`` and nothing it started survives.

Real processes: a plain Python process runs the bash tool (as the server would),
the test kills it with SIGKILL while ``sleep`` runs, and then looks for the sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.services import REPO, require
from toolcatalog import sandbox

SERVER = """
import json, sys
from django.conf import settings
settings.configure(NETA_TOOLS_NO_CGROUP=sys.argv[4] == "no-cgroup")  # plain Python: only what the tool reads
import toolcatalog.builtins  # no Django apps here: registering the builtins is this script's job
from toolcatalog.protocol import ToolContext, get_tool, run_tool
ctx = ToolContext(roots=(sys.argv[1],), sandbox=sys.argv[2])
print("running", flush=True)
run_tool(get_tool("bash"), ctx, {"command": sys.argv[3], "timeout": 300})
print("finished", flush=True)
"""


def sleeps(duration: str) -> list[int]:
    """PIDs of ``sleep <duration>`` processes (exactly that command line)."""
    wanted = f"sleep\0{duration}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read() == wanted:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def wait_for(predicate, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.parametrize(
    "mode,cgroups",
    [("none", True), ("none", False), ("bwrap", True)],
    ids=["none+cgroup", "none-process-group", "bwrap"],
)
def test_kill_9_of_the_server_kills_the_running_command(workspace, mode, cgroups):
    if mode == "bwrap":
        require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    a, b = f"100.{os.getpid()}{int(time.time() * 1000) % 100000}1", f"100.{os.getpid()}{int(time.time() * 1000) % 100000}2"
    # A child of the shell (not exec'd), and one that left the process group.
    command = f"sleep {a} & setsid sleep {b} & wait; echo done"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_") and k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(workspace), mode, command, "cgroup" if cgroups else "no-cgroup"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    contained = cgroups or mode == "bwrap"  # without cgroups a setsid'd process may escape (docs/tools.md)

    def survivors() -> list[int]:
        return sleeps(a) + (sleeps(b) if contained else [])

    try:
        assert server.stdout.readline().strip() == "running", server.stderr.read()
        assert wait_for(lambda: sleeps(a) and sleeps(b)), "the sleeps never started"
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        wait_for(lambda: survivors() == [])
        left = survivors()
    finally:
        for pid in sleeps(a) + sleeps(b):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if server.poll() is None:
            server.kill()
    assert left == [], f"still running after the server died: {left}"
