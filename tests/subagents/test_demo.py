"""The scripted demo, offline: ``manage.py chat "please delegate: look around"`` on a fresh
install delegates two tasks to two real child processes and summarizes their answers."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from runtime.agents.bootstrap import runtime_bootstrap
from runtime.models import AgentRun, ModelConfig, SubprocessRun
from sessions_tree.index import INDEXES

pytestmark = pytest.mark.django_db(transaction=True)


def test_manage_py_chat_please_delegate_runs_two_children_and_summarizes(tmp_path, settings):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = workspace
    settings.NETA_SANDBOX = "none"
    INDEXES.clear()
    runtime_bootstrap()
    ModelConfig.objects.filter(name="scripted-demo").update(options={"rules": "runtime/llm/scripted_demo.yaml", "delay_ms": 0})
    out = io.StringIO()
    call_command("chat", "--no-color", "please delegate: look around", stdout=out)
    text = out.getvalue()
    run = AgentRun.objects.get()
    assert run.status == "completed", (run.error, text[-2000:])
    children = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    assert [c.status for c in children] == ["completed", "completed"]
    assert all(c.pid and "ls" in {e["name"] for e in c.envelope["toolPolicy"]["tools"]} for c in children)
    assert all(c.final_text for c in children)
    assert "delegate_parallel" in text and "What the subagents found" in text
    for child in children:  # the chat printed each child's start (with its pid), its tool call and its end
        n = child.task_index + 1
        assert f"subagent {n} (default) started: pid {child.pid}" in text
        assert f"subagent {n} → ls" in text and f"subagent {n} (default) completed" in text
    assert "Subagents: 2/2 completed." in text
