"""Subagents on the celery backend: the rules of a delegating agent, a deployment of a test's
own (a runs worker and a subagent worker), and reading a batch's child runs."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

from tests.support.deployment import Deployment
from tests.support.services import require_mariadb_and_redis


def delegating_rules(agent: str, children: dict | None = None) -> dict:
    """``agent`` delegates two looks to itself on "delegate"; its children list the workspace
    and answer (or do what ``children`` says)."""
    return {
        "version": 1,
        "rules": [
            {
                "match": "delegate",
                "replies": [
                    [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                        {"agent": agent, "task": "first look"}, {"agent": agent, "task": "second look"}]}}}],
                    [{"text": "Summarized."}],
                ],
            }
        ],
        "default": children or {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Child done: {{user}}"}]]},
    }  # fmt: skip


def new_agent(deployment: Deployment, rules_for, **policy) -> str:
    """An agent of the test's own that may delegate to itself; ``rules_for(name)`` its rules."""
    name = f"sub-{uuid.uuid4().hex[:6]}"
    deployment.add_agent(name, rules_for(name), subagent_policy={"enabled": True, "agents": [name], **policy})
    return name


def own_deployment(workdir: Path, subagent_slots: int, rules: dict | None = None, *, subagent_policy: dict | None = None,
                   env: dict | None = None) -> Deployment:
    """A deployment of the test's own (no server): a runs worker (``-P solo``) and a subagent
    worker (prefork, ``subagent_slots`` processes, prefetch 1), started; the default agent
    answers by ``rules``. ``NETA_RUN_STALE_SECONDS=3``: a reaper round soon sees a lost run."""
    require_mariadb_and_redis()
    deployment = Deployment(
        workdir, servers=0, database="mysql", redis=True, backend="celery", rules=rules,
        extra_env={"NETA_RUN_STALE_SECONDS": "3", **(env or {})},
    )  # fmt: skip
    try:
        deployment.prepare()
        if subagent_policy is not None:
            deployment.set_rules(rules, subagent_policy=subagent_policy)
        start_runs_and_subagents(deployment, subagent_slots)
    except BaseException:
        deployment.close()
        raise
    return deployment


def start_runs_and_subagents(deployment: Deployment, subagent_slots: int) -> None:
    deployment.start_workers(
        {"name": "runs", "queues": deployment.queue, "pool": "solo"},
        {"name": "subagents", "queues": deployment.subagent_queue, "concurrency": subagent_slots, "options": ("--prefetch-multiplier", "1")},
    )


def children(deployment: Deployment, session_id: str, columns: str) -> list[tuple]:
    """The session's child runs (``columns`` of ``runtime_subprocessrun``), in task order."""
    return deployment.sql(f"SELECT {columns} FROM runtime_subprocessrun WHERE session_id = %s ORDER BY task_index, id", session_id)


def terminal_events(deployment: Deployment, session_id: str) -> list[int]:
    """How many terminal events (``run_end``, ``run_error``) each of the session's child runs recorded."""
    rows = deployment.sql(
        "SELECT e.run_id, COUNT(*) FROM runtime_subprocessevent e JOIN runtime_subprocessrun r ON r.id = e.run_id "
        "WHERE r.session_id = %s AND e.type IN ('run_end', 'run_error') GROUP BY e.run_id",
        session_id,
    )
    return sorted(n for _, n in rows)


def wait_running_children(deployment: Deployment, session_id: str, count: int, timeout: float) -> list[int]:
    """Pids of the session's running child runs, once ``count`` of them run (a process each)."""
    deadline = time.monotonic() + timeout
    pids: list[int] = []
    while time.monotonic() < deadline:
        rows = children(deployment, session_id, "status, pid")
        pids = [pid for status, pid in rows if status == "running" and pid is not None]
        if len(pids) >= count:
            break
        time.sleep(0.1)
    assert len(pids) == count, (pids, deployment.log("subagents")[-3000:])
    return pids


def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]
