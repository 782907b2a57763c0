"""NETA_SANDBOX=auto: bubblewrap when the start-up probe shows it works, else none with a warning.

Real probes: bwrap runs here (as root), and is hidden by pointing the setting at a
missing binary or by a PATH without it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tests.support.services import REPO
from toolcatalog import sandbox
from toolcatalog.protocol import ToolContext, get_tool, run_tool


@pytest.fixture(autouse=True)
def fresh_probe():
    sandbox.reset_sandbox_probe()
    yield
    sandbox.reset_sandbox_probe()


def test_auto_picks_bwrap_where_it_works(settings, bwrap_ok, workspace):
    settings.NETA_SANDBOX = "auto"
    choice = sandbox.effective_sandbox()
    assert (choice.configured, choice.mode, choice.fell_back) == ("auto", "bwrap", False)
    ctx = ToolContext(roots=(workspace,))
    assert ctx.sandbox == "bwrap"
    result = run_tool(get_tool("bash"), ctx, {"command": "hostname; ls /proc | grep -c '^[0-9]'"})
    assert result.details["sandbox"] == "bwrap"
    assert result.text_output().split()[0] == "neta-sandbox"  # really inside the sandbox


def test_auto_falls_back_to_none_when_the_binary_is_missing(settings, workspace, caplog):
    settings.NETA_SANDBOX = "auto"
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    with caplog.at_level(logging.WARNING, logger="toolcatalog.sandbox"):
        choice = sandbox.effective_sandbox()
        sandbox.effective_sandbox()  # logged once, not per call
    assert (choice.mode, choice.fell_back) == ("none", True)
    assert "/nonexistent/bwrap" in choice.reason
    logged = [r.getMessage() for r in caplog.records if r.name == "toolcatalog.sandbox"]
    assert len(logged) == 1 and "WITHOUT a sandbox" in logged[0]
    ctx = ToolContext(roots=(workspace,))
    assert ctx.sandbox == "none"
    assert run_tool(get_tool("bash"), ctx, {"command": "true"}).details["sandbox"] == "none"


def test_auto_falls_back_when_bwrap_is_not_on_path(settings, monkeypatch, tmp_path):
    settings.NETA_SANDBOX = "auto"
    settings.NETA_SANDBOX_BWRAP = "bwrap"
    assert sandbox.effective_sandbox().mode in ("bwrap", "none")
    sandbox.reset_sandbox_probe()
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap
    choice = sandbox.effective_sandbox()
    assert choice.mode == "none" and "on PATH" in choice.reason


def test_explicit_bwrap_never_falls_back(settings):
    settings.NETA_SANDBOX = "bwrap"
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    choice = sandbox.effective_sandbox()
    assert choice.mode == "bwrap" and "not installed" in choice.reason


def test_a_server_process_without_bwrap_says_so_in_check_and_log(tmp_path):
    """The real thing: a server process (default settings) whose PATH has no bwrap, and `manage.py check`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(NETA_VAR_DIR=str(tmp_path / "var"), PATH=str(tmp_path), PYTHONPATH=str(REPO))  # NETA_SANDBOX unset
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'neta.settings'); django.setup();"
        "from django.conf import settings; from toolcatalog.sandbox import effective_sandbox;"
        "print('SETTING', settings.NETA_SANDBOX, 'MODE', effective_sandbox().mode)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert "SETTING auto MODE none" in out.stdout, out.stderr  # auto is the default
    assert "WITHOUT a sandbox" in out.stderr  # the log line, on the server's log
    check = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert "toolcatalog.W002" in check.stderr + check.stdout


def test_a_bwrap_put_on_path_is_found_within_seconds(settings, monkeypatch, tmp_path):
    """The PATH search for bwrap is reused a few seconds (a tool context is built per
    round of tool calls): a new PATH is searched at once, a binary installed meanwhile
    is found when the reuse ends."""
    settings.NETA_SANDBOX_BWRAP = "bwrap"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert sandbox.bwrap_binary() == ("bwrap", None)
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert sandbox.bwrap_binary() == ("bwrap", None)  # the same PATH within the window
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/nonexistent")
    assert sandbox.bwrap_binary() == ("bwrap", str(fake))  # another PATH: searched now
    monkeypatch.setenv("PATH", str(bin_dir))
    assert sandbox.bwrap_binary() == ("bwrap", None)
    monkeypatch.setattr(sandbox, "_WHICH_SECONDS", 0.0)
    assert sandbox.bwrap_binary() == ("bwrap", str(fake))
