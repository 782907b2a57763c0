"""Subagents on the distributed backend with real parts: a Celery worker for runs, another
for ``NETA_SUBAGENT_QUEUE`` (prefork, prefetch 1), Redis, MariaDB — separate processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import REPO
from tests.runtime.test_celery_worker import Deployment

pytestmark = pytest.mark.slow

RULES = {
    "version": 1,
    "rules": [
        {
            "match": "delegate",
            "replies": [
                [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                    {"agent": "default", "task": "first look"}, {"agent": "default", "task": "second look"}]}}}],
                [{"text": "Summarized."}],
            ],
        }
    ],
    "default": {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Child done: {{user}}"}]]},
}  # fmt: skip


class SubagentDeployment(Deployment):
    def __init__(self, tmp):
        super().__init__(tmp)
        self.subagent_queue = f"neta-sub-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.env["NETA_SUBAGENT_QUEUE"] = self.subagent_queue
        self.set_rules(RULES)
        self.workers: list[subprocess.Popen] = []

    def start(self, queue: str, pool: list[str], name: str) -> subprocess.Popen:
        return self.start_workers((queue, pool, name))[0]

    def start_workers(self, *specs: tuple[str, list[str], str]) -> list[subprocess.Popen]:
        """Start a worker per (queue, pool options, name) at once; return them once all are ready."""
        started = []
        for queue, pool, name in specs:
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "neta", "worker", "-l", "info", "-Q", queue, "-n", f"{name}@%h",
                 *pool, "--without-gossip", "--without-mingle"],
                cwd=REPO, env=self.env, stdout=open(self.tmp / f"{name}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            self.workers.append(worker)
            started.append((worker, self.tmp / f"{name}.log"))
        deadline = time.monotonic() + 60
        for worker, log_path in started:
            while "ready." not in log_path.read_text():
                assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.1)
        return [worker for worker, _ in started]

    def start_runs_and_subagents(self, subagent_pool: list[str]) -> tuple[subprocess.Popen, subprocess.Popen]:
        """The runs worker (solo) and the subagent queue's worker (prefork, prefetch 1)."""
        runs, subs = self.start_workers(
            (self.queue, ["-P", "solo"], "runs"),
            (self.subagent_queue, ["-P", "prefork", *subagent_pool, "--prefetch-multiplier", "1"], "subagents"),
        )
        return runs, subs

    def rows(self, sql: str, *args):
        cursor = self.conn.cursor()
        cursor.execute(sql.replace("{db}", self.db), args)
        return cursor.fetchall()

    def wait_running_children(self, count: int, timeout: float) -> list[int]:
        """Pids of the running child runs, once ``count`` of them run (a process each)."""
        deadline = time.monotonic() + timeout
        pids: list[int] = []
        while time.monotonic() < deadline:
            pids = [p for (p,) in self.rows("SELECT pid FROM `{db}`.runtime_subprocessrun WHERE status = 'running' AND pid IS NOT NULL")]
            if len(pids) >= count:
                break
            time.sleep(0.1)
        assert len(pids) == count, (pids, self.logs())
        return pids

    def logs(self, *names: str) -> str:
        return "\n".join((self.tmp / f"{n}.log").read_text()[-3000:] for n in (names or ("subagents",)))

    def stop(self):
        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)


@pytest.fixture
def deployment(tmp_path):
    d = SubagentDeployment(tmp_path)
    yield d
    d.stop()
    d.close()


def test_children_run_on_their_own_queue_and_worker(deployment):
    runs, subs = deployment.start_runs_and_subagents(["-c", "2"])
    session_id, run_id = deployment.prompt("please delegate")
    row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=120)
    assert row["status"] == "completed", (row, deployment.logs())
    children = deployment.rows(
        "SELECT status, backend, worker_pid, pid, final_text, event_count FROM `{db}`.runtime_subprocessrun ORDER BY task_index"
    )
    assert [c[0] for c in children] == ["completed", "completed"]
    assert {c[1] for c in children} == {"celery"}
    # Supervised by the subagent worker's pool processes, not by the runs worker; each child its own process.
    subagent_pool = {int(p) for p in subprocess.run(["pgrep", "-g", str(subs.pid)], capture_output=True, text=True).stdout.split()}
    assert all(c[2] in subagent_pool and c[2] != runs.pid for c in children)
    assert children[0][3] != children[1][3]
    assert [c[4] for c in children] == ["Child done: first look", "Child done: second look"]
    lines = deployment.export(session_id)
    kinds = [line["type"] if line["type"] != "message" else line["message"]["role"] for line in lines[1:]]
    kinds = [k for k in kinds if k not in ("model_change", "thinking_level_change")]
    # ..., then the title the session gives itself after its first answer (runs/titles.py).
    assert kinds == ["user", "assistant", "subagent_batch", "subagent_result", "subagent_result", "toolResult", "assistant", "session_info"]
    result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
    assert "Child done: first look" in result["content"][0]["text"] and "Child done: second look" in result["content"][0]["text"]


def test_a_killed_subagent_worker_loses_its_children_and_the_parent_goes_on(deployment):
    deployment.set_rules({**RULES, "default": {"reply": [{"pause_ms": 120000}, {"text": "never"}]}})
    _, subs = deployment.start_runs_and_subagents(["-c", "2"])
    session_id, run_id = deployment.prompt("please delegate")
    pids = deployment.wait_running_children(2, timeout=60)
    os.killpg(subs.pid, signal.SIGKILL)  # the worker and its pool; the children die with their supervisor
    subs.wait(timeout=10)
    row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=90)
    assert row["status"] == "completed", row  # the parent turn finished, with the failures in its result
    children = deployment.rows("SELECT status, error_code FROM `{db}`.runtime_subprocessrun")
    assert [c[0] for c in children] == ["lost", "lost"]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    result = next(
        line["message"] for line in deployment.export(session_id) if line["type"] == "message" and line["message"]["role"] == "toolResult"
    )
    assert result["isError"] is True and "lost" in result["content"][0]["text"]


def _group_members(pgid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def test_a_parent_abort_with_8_running_children_ends_all_recorded_and_leaves_no_process(deployment):
    """Celery hosting: eight children on the subagent worker's pool, the parent aborted → all
    eight ``cancelled`` (who cancelled recorded), one terminal event each, no process of any
    child's group left, the batch finalized as cancelled and the parent run aborted."""
    eight = {"tasks": [{"agent": "default", "task": f"hold {i}"} for i in range(8)]}
    rules = {
        "version": 1,
        "rules": [{"match": "delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": eight}}], [{"text": "never"}]]}],
        "default": {"reply": [{"pause_ms": 120000}, {"text": "never"}]},
    }
    deployment.set_rules(rules, subagent_policy={"enabled": True, "agents": ["default"], "max_concurrency": 8})
    deployment.start_runs_and_subagents(["-c", "8"])
    session_id, run_id = deployment.prompt("please delegate")
    pids = deployment.wait_running_children(8, timeout=120)
    assert all(_group_members(pid) for pid in pids)  # each child leads its own process group
    deployment.python(f"from runtime.runs.prompts import run_abort; run_abort(session_id={session_id!r})")
    row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=90)
    assert row["status"] == "aborted", row
    children = deployment.rows("SELECT id, status, cancelled_by, ended_at FROM `{db}`.runtime_subprocessrun ORDER BY task_index")
    assert len(children) == 8 and {c[1] for c in children} == {"cancelled"}, children
    assert all("aborted" in c[2] for c in children) and all(c[3] is not None for c in children)
    for child_pk, *_ in children:
        terminal = deployment.rows("SELECT COUNT(*) FROM `{db}`.runtime_subprocessevent WHERE run_id = %s AND type IN ('run_end', 'run_error')", child_pk)
        assert terminal[0][0] == 1
    assert not [pid for pid in pids if _group_members(pid)]  # 0 orphans: no process of any child's group
    lines = deployment.export(session_id)
    batch = next(line for line in lines if line["type"] == "subagent_batch")
    assert batch["metadata"]["state"] == "cancelled" and len(batch["metadata"]["runs"]) == 8
    assert sum(1 for line in lines if line["type"] == "subagent_result") == 8


def test_a_one_slot_subagent_pool_runs_a_depth_2_tree_with_a_session_limit_of_1(deployment):
    """One prefork process for the whole subagent queue and one session slot: the child's
    grandchildren are supervised by threads of the pool process that supervises the child
    (never a second task waiting for a slot it holds), and the waiting child lends its
    session slot to them. Everything completes; nothing waits on itself."""
    rules = {
        "version": 1,
        "rules": [
            {"match": "please delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "default", "task": "middle one"}, {"agent": "default", "task": "middle two"}]}}}], [{"text": "Summarized."}]]},
            {"match": "middle", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "default", "task": "leaf a"}, {"agent": "default", "task": "leaf b"}]}}}], [{"text": "Middle done: {{user}}"}]]},
        ],
        "default": {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Leaf done: {{user}}"}]]},
    }  # fmt: skip
    deployment.set_rules(rules, subagent_policy={"enabled": True, "agents": ["default"], "max_depth": 2,
                                                 "max_concurrency_per_session": 1, "child_budget": {"wall_clock_seconds": 150}})
    _, subs = deployment.start_runs_and_subagents(["-c", "1"])
    session_id, run_id = deployment.prompt("please delegate")
    row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=240)
    log = deployment.logs()
    assert row["status"] == "completed", (row, log)
    children = deployment.rows(
        "SELECT id, depth, status, error_code, worker_pid, parent_subprocess_id, final_text, backend FROM `{db}`.runtime_subprocessrun"
    )
    assert len(children) == 6 and {c[2] for c in children} == {"completed"}, (children, log)
    middles = [c for c in children if c[1] == 1]
    leaves = [c for c in children if c[1] == 2]
    assert len(middles) == 2 and len(leaves) == 4
    pool = set(_group_members(subs.pid)) - {subs.pid}
    assert len(pool) == 1 and {c[4] for c in children} == pool  # one pool process supervised all six
    assert {c[7] for c in middles} == {"celery"} and {c[7] for c in leaves} == {"inline"}  # grandchildren: threads, not tasks
    for middle in middles:
        mine = sorted(c[6] for c in leaves if c[5] == middle[0])
        assert mine == ["Leaf done: leaf a", "Leaf done: leaf b"]
    assert sorted(c[6] for c in middles) == ["Middle done: middle one", "Middle done: middle two"]


def test_a_killed_runs_worker_mid_batch_ends_the_run_recorded_and_its_children_too(deployment):
    """The worker running the parent turn is SIGKILLed while its children run: the reaper
    records the run ``lost`` (never left running), its batch entry is closed as aborted, the
    children are cancelled by their supervisors (one terminal event each) and no process of
    any child's group is left."""
    deployment.set_rules({**RULES, "default": {"reply": [{"pause_ms": 120000}, {"text": "never"}]}})
    runs, _ = deployment.start_runs_and_subagents(["-c", "2"])
    session_id, run_id = deployment.prompt("please delegate")
    pids = deployment.wait_running_children(2, timeout=90)
    os.killpg(runs.pid, signal.SIGKILL)  # the parent's worker: its turn (and its host loop) die mid-batch
    runs.wait(timeout=10)
    assert deployment.run_row(run_id)["status"] == "running"  # until a reaper round finds it
    deadline = time.monotonic() + 120
    children = []
    while time.monotonic() < deadline:
        deployment.manage("runtime_reap")  # what the periodic reaper does (stale after NETA_RUN_STALE_SECONDS=3)
        children = deployment.rows("SELECT status, cancelled_by, ended_at FROM `{db}`.runtime_subprocessrun ORDER BY task_index")
        if deployment.run_row(run_id)["status"] != "running" and all(c[2] is not None for c in children):
            break
        time.sleep(1)
    row = deployment.run_row(run_id)
    assert row["status"] == "lost" and row["in_flight"] == "", row
    assert [c[0] for c in children] == ["cancelled", "cancelled"], children
    assert all("ended (lost)" in c[1] for c in children)
    ends = deployment.rows("SELECT run_id, COUNT(*) FROM `{db}`.runtime_subprocessevent WHERE type IN ('run_end', 'run_error') GROUP BY run_id")
    assert sorted(n for _, n in ends) == [1, 1]
    assert not [pid for pid in pids if _group_members(pid)]  # 0 orphans
    lines = deployment.export(session_id)
    batch = next(line for line in lines if line["type"] == "subagent_batch")
    assert batch["metadata"]["state"] == "lost" and "parent turn was lost" in batch["metadata"]["cancelledBy"]
    result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
    assert result["isError"] is True  # the open delegate call got its aborted result: the tree stays valid for Pi
