"""A child's bash under bubblewrap cannot reach the parent's data: a real parent delegates,
a real child process runs bash commands (scripted model) that try to read the parent's
session file and the SQLite database file, and to connect to MariaDB and Redis; what the
child reported (its recorded ``tool_result`` events) shows they failed.

The same commands with ``NETA_SANDBOX=none`` are the control: there they succeed, so the
commands do reach the targets and the bwrap case proves the sandbox, not a typo."""

from __future__ import annotations

import shlex
import socket

import pytest
from django.db import connection

from runtime.models import ModelConfig, RunStatus, SubprocessEvent, SubprocessRun
from sessions_tree.index import INDEXES
from tests.support.services import require
from tests.subagents.host_helpers import Parent, delegating, make_agent, policy, script
from toolcatalog.sandbox import bwrap_status, reset_sandbox_probe

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "parent-only-canary-5e1d"
SERVICES = {"mariadb": 3306, "redis": 6379}
PROBE = (
    "import socket\n"
    "for name, port in {ports}:\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', port), timeout=3).close()\n"
    "        print('OPEN', name)\n"
    "    except OSError as exc:\n"
    "        print('BLOCKED', name, type(exc).__name__, exc)\n"
)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def bash_call(command: str) -> list[dict]:
    return [{"tool_call": {"name": "bash", "arguments": {"command": command}}}]


@pytest.fixture
def workspace(tmp_path, settings):
    path = tmp_path / "workspace"
    path.mkdir()
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"  # next to the workspace, not inside it
    settings.NETA_WORKSPACE_DIR = path
    INDEXES.clear()
    return path


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_a_sandboxed_child_cannot_read_the_session_file_nor_reach_the_database(workspace, settings, mode):
    if mode == "bwrap":
        reset_sandbox_probe()
        require(bwrap_status().available, f"bubblewrap not usable here: {bwrap_status().reason}")
    for name, port in SERVICES.items():
        require(listening(port), f"{name} is not listening on 127.0.0.1:{port}")
    settings.NETA_SANDBOX = mode
    db_file = connection.settings_dict["NAME"]
    require(connection.vendor == "sqlite" and db_file and db_file != ":memory:", "the default test database is not a SQLite file")

    helper = make_agent("helper", script(), workspace=workspace)
    boss = make_agent("boss", delegating("delegate_task", {"agent": "helper", "task": "probe"}), workspace=workspace,
                      subagent_policy=policy("helper"))  # fmt: skip
    parent = Parent(boss)
    session_files = list(settings.NETA_SESSIONS_DIR.rglob(f"*_{parent.session_id}.jsonl"))
    assert len(session_files) == 1, session_files
    session_file = str(session_files[0])
    # The child's model: read the session file, read the database file, connect, then answer.
    child_rules = script(default={"replies": [
        bash_call(f"cat '{session_file}'"),
        bash_call(f"head -c 15 '{db_file}'"),
        bash_call("python3 -c " + shlex.quote(PROBE.format(ports=sorted(SERVICES.items())))),
        [{"text": "probed"}],
    ]})  # fmt: skip
    ModelConfig.objects.filter(pk=helper.model_id).update(options={"rules": child_rules})

    run = parent.prompt(f"please delegate {CANARY}")  # the user message is in the session file before the child runs
    assert run.status == RunStatus.COMPLETED, run.error
    child = SubprocessRun.objects.get(parent_run=run)
    assert child.status == "completed", (child.status, child.error_code)
    assert child.envelope["runtimeConfig"]["sandbox"]["mode"] == mode
    results = [e.payload for e in SubprocessEvent.objects.filter(run=child, type="tool_result").order_by("seq")]
    assert [r["name"] for r in results] == ["bash", "bash", "bash"], results
    read_session, read_db, probe = (r["preview"] for r in results)

    if mode == "none":  # the control: unsandboxed, every one of them works
        assert CANARY in read_session and '"type":"session"' in read_session, read_session
        assert "SQLite format 3" in read_db, read_db
        assert "OPEN mariadb" in probe and "OPEN redis" in probe, probe
        return
    assert results[0]["isError"] is True and CANARY not in read_session, read_session
    assert "No such file or directory" in read_session, read_session
    assert results[1]["isError"] is True and "SQLite" not in read_db, read_db
    assert "OPEN" not in probe and "BLOCKED mariadb" in probe and "BLOCKED redis" in probe, probe
