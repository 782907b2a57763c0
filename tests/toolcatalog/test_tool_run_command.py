"""manage.py tool_run: JSON out, clear errors and exit codes for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from toolcatalog import services

REPO = Path(__file__).resolve().parents[2]


def run_command(*argv: str) -> tuple[int, dict | None]:
    out = StringIO()
    try:
        call_command("tool_run", *argv, stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    text = out.getvalue()
    return code, json.loads(text) if text else None


@pytest.mark.django_db
def test_runs_a_tool_and_prints_json(workspace):
    (workspace / "f.txt").write_text("hello\n")
    code, payload = run_command("read", "--args", '{"path": "f.txt"}', "--root", str(workspace))
    assert code == 0
    assert payload == {"tool": "read", "content": [{"type": "text", "text": "hello\n"}], "isError": False}


@pytest.mark.django_db
def test_tool_errors_print_json_and_exit_1(workspace):
    code, payload = run_command("read", "--args", '{"path": "../etc/passwd"}', "--root", str(workspace))
    assert code == 1 and payload["isError"] is True
    assert payload["content"][0]["text"].startswith("Path refused: '../etc/passwd' resolves outside")


@pytest.mark.django_db
def test_cwd_and_several_roots(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    (b / "g.txt").write_text("in b")
    code, payload = run_command("bash", "--args", '{"command": "pwd"}', "--root", str(a), "--root", str(b),
                                "--cwd", str(a / "sub"), "--sandbox", "none")
    assert code == 0 and payload["content"][0]["text"] == f"{a}/sub\n"
    code, payload = run_command("read", "--args", json.dumps({"path": str(b / "g.txt")}), "--root", str(a),
                                "--root", str(b))
    assert code == 0 and payload["content"][0]["text"] == "in b"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope"], "unknown tool 'nope'; known tools: read, bash, edit, write, grep, find, ls"),
        (["read", "--args", "{bad"], "--args is not valid JSON"),
        (["read", "--args", "[1]"], "--args must be a JSON object"),
        (["read", "--args", "{}", "--root", "/nonexistent-neta"], "--root '/nonexistent-neta' is not a directory"),
        (["read", "--args", "{}", "--policy", '{"enabled": ["zz"]}'], "--policy is invalid: enabled[0]: unknown tool 'zz'"),
        (["bash", "--args", "{}", "--policy", '{"disabled": ["bash"]}'],
         "tool 'bash' is not available: listed in the agent's disabled tools (source: agent_policy)"),
    ],
)
def test_bad_input_is_a_command_error(workspace, argv, message):
    if "--root" not in argv:
        argv = [*argv, "--root", str(workspace)]
    with pytest.raises(CommandError) as info:
        call_command("tool_run", *argv)
    assert message in str(info.value)
    assert info.value.returncode == 2


@pytest.mark.django_db
def test_governance_applies(workspace, staff):
    services.tool_config_update(actor=staff, name="ls", enabled=False)
    with pytest.raises(CommandError, match="disabled by staff governance"):
        call_command("tool_run", "ls", "--root", str(workspace))


def test_real_process_bad_input_goes_to_stderr_with_exit_2(workspace):
    env = {**os.environ, "NETA_VAR_DIR": str(workspace.parent / "var")}
    done = subprocess.run(
        [sys.executable, "manage.py", "tool_run", "read", "--args", "not json", "--root", str(workspace)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "CommandError: --args is not valid JSON" in done.stderr
