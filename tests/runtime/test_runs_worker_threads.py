"""The runs worker as deployed: one Celery process on a threads pool runs many turns at once.

A deployment of its own (its worker is killed): 100 prompts at once on one worker process
(``-P threads -c 100``) whose database pool is capped at 6 connections. Every turn waits
4 s on its model without a connection, so all 100 are in flight together; every run
completes, the worker logs no error, and MariaDB never sees more connections to the
deployment's database than the pool's cap (plus this test's own). The first task the
worker takes finds the database out of reach (a test-only hook, once): it is sent again and
its run completes like the rest. Then 12 turns waiting
on their model when the worker is SIGKILLed: a new worker's start-up finds every one of
them (one dead process, all its turns) and ends each in a recorded state; none stays
running or queued.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from tests.support.deployment import Deployment
from tests.support.services import REPO, require_mariadb_and_redis, wait_until

pytestmark = pytest.mark.slow

PACED = {
    "version": 1,
    "rules": [{"match": {"contains": "hang"}, "reply": {"steps": [{"pause_ms": 120_000}, {"text": "late"}]}}],
    "default": {"reply": {"steps": [{"pause_ms": 4000}, {"text": "paced: {{user}}"}]}},
}
POOL = 6

PROMPT_MANY = """
import os
from runtime.models import Agent
from runtime.runs.prompts import session_prompt
from runtime.sessions.services import session_start
agent = Agent.objects.get(name="default")
sessions = [session_start(agent=agent).session_id for _ in range(int(os.environ["N"]))]
for sid in sessions:
    session_prompt(actor=None, session_id=sid, text=os.environ["TEXT"])
print(len(sessions))
"""


def _connections(dep: Deployment) -> int:
    [(count,)] = dep.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = %s", dep.name)
    return int(count)


def _statuses(dep: Deployment) -> list[str]:
    return [row["status"] for row in dep.runs()]


def _overlap(dep: Deployment) -> int:
    """The most runs that were running at one moment (from their start and end times)."""
    edges = []
    for started, finished in dep.sql("SELECT started_at, finished_at FROM runtime_agentrun WHERE finished_at IS NOT NULL"):
        edges += [(started, 1), (finished, -1)]
    running = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        running += step
        peak = max(peak, running)
    return peak


def test_one_threads_worker_runs_100_turns_at_once_on_a_bounded_pool_and_a_kill_loses_none(tmp_path):
    require_mariadb_and_redis()
    with Deployment(tmp_path / "dep", servers=0, database="mysql", redis=True, backend="celery", rules=PACED,
                    extra_env={"NETA_DB_POOL_SIZE": str(POOL)}) as dep:  # fmt: skip
        # The first task it takes finds the database out of reach (once, test-only hook): sent again, not lost.
        dep.start_worker("runs", queues=dep.queue, pool="threads", concurrency=100, NETA_TEST_FAULT_AT="receive_dberror")
        peak, done = [0], threading.Event()

        def sample():  # MariaDB's own count of the connections to this database, every 50 ms
            while not done.is_set():
                peak[0] = max(peak[0], _connections(dep))
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            dep.python(PROMPT_MANY, env={"N": "100", "TEXT": "hello"})
            wait_until(lambda: all(s not in ("queued", "running") for s in _statuses(dep)), 90, "every run to end")
        finally:
            done.set()
            sampler.join()
        assert _overlap(dep) >= 80  # turns that ran at once on the one process
        assert _statuses(dep) == ["completed"] * 100, [(r["status"], r["error"]) for r in dep.runs() if r["status"] != "completed"]
        log = dep.log("runs")
        assert log.count("out of reach before the claim") == 1 and "retry: Retry in" in log, log[-3000:]
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
        assert peak[0] <= POOL + 2, peak[0]  # the worker's pool, the prompting process and this test's sampler

        # One process, all its turns: SIGKILLed while 12 wait on their model.
        dep.python(PROMPT_MANY, env={"N": "12", "TEXT": "hang on"})
        wait_until(lambda: _statuses(dep).count("running") == 12, 60, "the 12 turns to run")
        dep.kill("runs")
        dep.start_worker("runs", queues=dep.queue, pool="threads", concurrency=100)  # reaps at start-up
        wait_until(lambda: all(s not in ("queued", "running") for s in _statuses(dep)), 60, "the killed turns to be reaped")
        rows = dep.runs()[100:]
        assert [r["status"] for r in rows] == ["lost"] * 12, [(r["status"], r["error"]) for r in rows]
        assert all("is gone (process" in r["error"] for r in rows)


def test_check_and_health_warn_when_the_pools_can_exceed_max_connections(distributed):
    [(limit,)] = distributed.sql("SELECT @@max_connections")
    processes = str(int(limit) // 20 + 1)  # x NETA_DB_POOL_SIZE 20 > max_connections
    check = subprocess.run([sys.executable, "manage.py", "check", "--database", "default"], cwd=REPO, capture_output=True,
                           text=True, env={**distributed.env, "NETA_DB_PROCESSES": processes}, timeout=120)  # fmt: skip
    assert "runtime.W004" in check.stderr and f"max_connections {limit}" in check.stderr, check.stderr
    fine = subprocess.run([sys.executable, "manage.py", "check", "--database", "default"], cwd=REPO, capture_output=True,
                          text=True, env={**distributed.env, "NETA_DB_PROCESSES": "2"}, timeout=120)  # fmt: skip
    assert "runtime.W004" not in fine.stderr, fine.stderr
    report = json.loads(distributed.python(
        "import json; from runtime.runs.health import connection_budget; print(json.dumps(connection_budget()))",
        env={"NETA_DB_PROCESSES": processes},
    ).strip().splitlines()[-1])  # fmt: skip
    assert report["ok"] is False and report["maxConnections"] == int(limit) and report["needed"] > int(limit)
