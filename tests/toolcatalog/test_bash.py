"""bash: real processes — output, limits, timeouts, cancellation, secrets, the sandbox."""

from __future__ import annotations

import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.services import require
from tests.toolcatalog.helpers import cancel_after, processes_with
from toolcatalog import sandbox
from toolcatalog.protocol import ToolContext, ToolResult, get_tool, run_tool

CANARIES = {
    "NETA_CANARY": "canary-neta-5b1e",
    "DJANGO_CANARY": "canary-django-5b1e",
    "OPENAI_API_KEY": "canary-apikey-5b1e",
    "MY_SECRET_SAUCE": "canary-secret-5b1e",
    "GITHUB_TOKEN": "canary-token-5b1e",
    "DB_PASSWORD": "canary-password-5b1e",
}


def bash(ctx: ToolContext, command: str, **extra) -> ToolResult:
    return run_tool(get_tool("bash"), ctx, {"command": command, **extra})


def marker() -> str:
    """A sleep duration unique to this test run, to find processes by command line."""
    return f"{random.randint(1000, 9999)}.{random.randint(100000, 999999)}"


# --- plain behaviour ----------------------------------------------------------------


def test_output_exit_code_and_cwd(ctx, workspace):
    (workspace / "sub").mkdir()
    sub_ctx = ToolContext(roots=(workspace,), cwd=workspace / "sub", sandbox="none")
    ok = bash(sub_ctx, "pwd; echo out; echo err >&2")
    assert not ok.is_error
    assert ok.text_output() == f"{workspace}/sub\nout\nerr\n"
    assert ok.details["exitCode"] == 0
    failed = bash(ctx, "echo partial; exit 3")
    assert failed.is_error
    assert failed.text_output() == "partial\n\n\nCommand exited with code 3"
    assert failed.details["exitCode"] == 3
    assert bash(ctx, "true").text_output() == "(no output)"
    bad = run_tool(get_tool("bash"), ctx, {"command": "ls", "timeout": -1})
    assert bad.is_error and "timeout: -1 is less than the minimum of 0" in bad.text_output()


def test_unicode_invalid_bytes_and_ansi(ctx):
    out = bash(ctx, r"printf 'emoji 😀 中文\n\xed\xa0\x80 \xff end\n\033[31mred\033[0m\r\n'").text_output()
    assert out == "emoji 😀 中文\n\ufffd\ufffd\ufffd \ufffd end\nred\n"


def test_long_output_is_truncated_like_pi_and_kept_in_full(ctx, output_dir):
    result = bash(ctx, "seq 1 100000")
    text = result.text_output()
    body, notice = text.rsplit("\n\n", 1)
    assert body.split("\n")[0] == "98002" and body.split("\n")[-2] == "100000"
    path = result.details["fullOutputPath"]
    assert notice == f"[Showing lines 98002-100001 of 100001. Full output: {path}]"
    assert Path(path).parent == output_dir
    assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 100001))
    assert result.details["truncation"]["truncatedBy"] == "lines"


def test_one_huge_line_keeps_its_end(ctx):
    result = bash(ctx, "head -c 200000 /dev/zero | tr '\\0' 'a'; printf '😀'")
    text = result.text_output()
    assert text.endswith("😀\n\n[Showing last 50.0KB of line 1. Full output: " + result.details["fullOutputPath"] + "]")
    assert result.details["truncation"]["lastLinePartial"] is True


def test_progress_streams_partial_output(workspace):
    partials: list[str] = []
    ctx = ToolContext(roots=(workspace,), sandbox="none", on_progress=lambda r: partials.append(r.text_output()))
    result = bash(ctx, "for i in 1 2 3 4; do echo step$i; sleep 0.4; done")
    assert result.text_output() == "step1\nstep2\nstep3\nstep4\n"
    assert len(partials) >= 2
    assert partials[0].startswith("step1")
    assert all(result.text_output().startswith(p) for p in partials)


# --- secrets ------------------------------------------------------------------------


@pytest.fixture
def canaries(monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    return CANARIES


def test_secrets_never_reach_the_command(ctx, canaries):
    out = bash(ctx, "env; echo $NETA_CANARY $OPENAI_API_KEY $GITHUB_TOKEN").text_output()
    for value in canaries.values():
        assert value not in out
    assert "PATH=" in out  # the environment is scrubbed, not emptied


def test_policy_passes_one_secret_through_explicitly(workspace, canaries):
    ctx = ToolContext(roots=(workspace,), sandbox="none", env_passthrough=("GITHUB_TOKEN",))
    out = bash(ctx, "env").text_output()
    assert "GITHUB_TOKEN=canary-token-5b1e" in out
    assert "canary-apikey-5b1e" not in out and "canary-neta-5b1e" not in out


def test_secrets_invisible_in_the_sandbox_even_through_proc(bwrap_ctx, canaries):
    out = bash(bwrap_ctx, "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ls /proc | wc -l").text_output()
    for value in canaries.values():
        assert value not in out


# --- limits, timeouts, cancellation ----------------------------------------------------


def test_timeout_kills_the_whole_tree(ctx):
    m = marker()
    started = time.monotonic()
    result = bash(ctx, f"sleep {m} & sleep {m}; echo never", timeout=1)
    assert time.monotonic() - started < 10  # the 100-second class of sleep did not run out
    assert result.is_error and result.text_output() == "Command timed out after 1 seconds"
    assert result.details["timedOut"] is True and result.details["exitCode"] is None
    assert processes_with(m) == []


def test_cancellation_kills_the_whole_tree(workspace):
    m = marker()
    cancel = threading.Event()
    ctx = ToolContext(roots=(workspace,), sandbox="none", cancel=cancel)
    timer = cancel_after(cancel, 0.5)
    result = bash(ctx, f"echo started; sleep {m}")
    timer.join()
    assert result.is_error and result.text_output() == "started\n\n\nCommand aborted"
    assert result.details["cancelled"] is True
    assert processes_with(m) == []


@pytest.mark.parametrize("mode", ["none", "bwrap"])
@pytest.mark.parametrize("ending", ["timeout", "cancel", "exit"])
def test_double_fork_and_setsid_leave_no_survivor(workspace, cgroups_ok, mode, ending):
    if mode == "bwrap":
        require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    m = marker()
    cancel = threading.Event()
    ctx = ToolContext(roots=(workspace,), sandbox=mode, cancel=cancel)
    daemon = f"(setsid sh -c 'sleep {m} & exec sleep {m}' > /dev/null 2>&1 &)"
    if ending == "exit":
        result = bash(ctx, f"{daemon}; sleep 0.3; echo launched")
        assert not result.is_error and result.text_output() == "launched\n"
        if mode == "none":
            assert result.details["stoppedBackgroundProcesses"] >= 1
        # Under bwrap the kernel may take them down with the PID namespace before
        # Neta counts them; either way none may survive (checked below).
    elif ending == "timeout":
        result = bash(ctx, f"{daemon}; sleep {m}", timeout=1)
        assert result.details["timedOut"] is True
    else:
        timer = cancel_after(cancel, 0.7)
        result = bash(ctx, f"{daemon}; sleep {m}")
        timer.join()
        assert result.details["cancelled"] is True
    assert processes_with(m) == []


@pytest.mark.parametrize("mode", ["none", "bwrap"])
@pytest.mark.parametrize("shell_waits", [True, False])
def test_fork_bomb_is_stopped(workspace, pids_limit_ok, mode, shell_waits):
    if mode == "bwrap":
        require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    name = f"bomb{random.randint(10000, 99999)}"
    ctx = ToolContext(roots=(workspace,), sandbox=mode)
    command = f"{name}(){{ {name}|{name}& }};{name}" + ("; sleep 30" if shell_waits else "")
    result = bash(ctx, command, timeout=30)
    if shell_waits:  # the shell lives on, so the bomb grows until the process limit ends the command
        assert result.is_error and result.details["limitHit"] == "processes"
        assert "more than 256 processes" in result.text_output()
    # Otherwise the shell exits at once and the bomb dies with it: by the process limit, the
    # end-of-command kill, or (bwrap) the PID namespace going away. Either way nothing survives.
    assert processes_with(name) == []


def test_yes_into_a_file_is_stopped_by_the_file_size_limit(ctx, workspace, settings):
    settings.NETA_BASH_MAX_FILE_MB = 8
    result = bash(ctx, "yes > big.txt", timeout=60)
    assert result.is_error
    assert result.details["limitHit"] == "file_size"
    assert "size limit" in result.text_output()
    assert (workspace / "big.txt").stat().st_size <= 8 * 1024 * 1024


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_a_runaway_allocation_fails_in_the_command_at_the_memory_limit(workspace, settings, mode):
    if mode == "bwrap":
        require(sandbox.bwrap_status().available, sandbox.bwrap_status().reason)
    settings.NETA_BASH_MAX_MEMORY_MB = 256
    ctx = ToolContext(roots=(workspace,), sandbox=mode)
    python = "python3 -c \"import sys; b = bytearray(int(sys.argv[1]) * 2**20); print('allocated', len(b) >> 20)\""
    result = bash(ctx, f"{python} 600", timeout=60)
    assert result.is_error and result.details["exitCode"] == 1
    assert "MemoryError" in result.text_output()
    small = bash(ctx, f"{python} 64", timeout=60)
    assert not small.is_error and small.text_output() == "allocated 64\n"


def test_a_hundred_sleeps_all_end_at_their_timeout(workspace):
    m = marker()
    ctx = ToolContext(roots=(workspace,), sandbox="none")
    with ThreadPoolExecutor(max_workers=100) as pool:
        results = list(pool.map(lambda _: bash(ctx, f"sleep {m}", timeout=1), range(100)))
    assert all(r.details.get("timedOut") for r in results)
    assert max(r.details["durationMs"] for r in results) < 10_000  # nowhere near the sleep's length
    assert processes_with(m) == []


def test_without_cgroups_the_process_group_is_still_killed(workspace, settings):
    settings.NETA_TOOLS_NO_CGROUP = True
    sandbox.cgroup_support.cache_clear()
    try:
        m = marker()
        ctx = ToolContext(roots=(workspace,), sandbox="none")
        result = bash(ctx, f"sleep {m} & sleep {m}", timeout=1)
        assert result.details["containment"] == "process group only"
        assert result.details["timedOut"] is True
        assert processes_with(m) == []
    finally:
        settings.NETA_TOOLS_NO_CGROUP = False
        sandbox.cgroup_support.cache_clear()


# --- the bubblewrap sandbox -------------------------------------------------------------


def test_sandbox_confines_the_filesystem(bwrap_ctx, workspace, outside):
    result = bash(bwrap_ctx, (
        f"echo made > inside.txt; touch /usr/neta-x 2>&1; cat {outside}/secret.txt 2>&1; "
        "cat /etc/shadow 2>&1; ls /root 2>&1; hostname; echo pid=$$"
    ))
    out = result.text_output()
    assert (workspace / "inside.txt").read_text() == "made\n"
    assert "Read-only file system" in out
    assert "TOP-SECRET" not in out
    assert f"{outside}/secret.txt: No such file or directory" in out
    assert "/etc/shadow: No such file or directory" in out
    assert "neta-sandbox" in out
    assert not Path("/usr/neta-x").exists()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sandbox_network_only_when_allowed(bwrap_ok, workspace):
    require(_port_open(3306), "nothing listens on 127.0.0.1:3306 (MariaDB)")
    probe = "exec 3<>/dev/tcp/127.0.0.1/3306 && echo connected || echo refused"
    closed = bash(ToolContext(roots=(workspace,), sandbox="bwrap"), probe).text_output()
    opened = bash(ToolContext(roots=(workspace,), sandbox="bwrap", network=True), probe).text_output()
    assert closed.strip().endswith("refused")
    assert opened.strip() == "connected"


def test_missing_bwrap_is_a_clear_error_and_nothing_runs(workspace, settings):
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    sandbox.reset_sandbox_probe()
    try:
        ctx = ToolContext(roots=(workspace,), sandbox="bwrap")
        result = bash(ctx, "touch ran.txt")
        assert result.is_error
        assert result.text_output() == (
            "NETA_SANDBOX=bwrap but bwrap is not installed ('/nonexistent/bwrap' is not an executable there; "
            "Debian package 'bubblewrap')"
        )
        assert not (workspace / "ran.txt").exists()
    finally:
        sandbox.reset_sandbox_probe()


def test_output_dir_from_settings_and_old_outputs_are_pruned(workspace, tmp_path, settings):
    import os as _os

    target = tmp_path / "kept-outputs"
    target.mkdir()
    stale = target / "bash-old.log"
    stale.write_text("old")
    _os.utime(stale, (time.time() - 8 * 24 * 3600,) * 2)
    fresh = target / "bash-new.log"
    fresh.write_text("new")
    settings.NETA_TOOL_OUTPUT_DIR = str(target)
    ctx = ToolContext(roots=(workspace,), sandbox="none")  # no output_dir: the setting decides
    result = bash(ctx, "seq 1 5000")
    assert Path(result.details["fullOutputPath"]).parent == target
    assert not stale.exists() and fresh.exists()
