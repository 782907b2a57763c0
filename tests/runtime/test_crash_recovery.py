"""The crash suite: real servers and workers killed with SIGKILL, restarted, and checked
with no request needed to recover.

Inline: Daphne on SQLite with the file provider. Distributed: Daphne + a Celery worker
(prefork, two children) on Redis + MariaDB. Kill points (12):

- killed from outside: mid-stream; during a tool (a slow ``bash sleep``); mid-stream of a
  tool call; with runs still queued (more prompts than ``NETA_INLINE_WORKERS`` / worker
  children); with a follow-up and a steer queued on the dying runs;
- the process killing itself at a named point (``NETA_TEST_KILL_AT``, a test-only hook in
  runtime/runs/backends.py): before the first token (``stream_start``), at finalize (with a
  follow-up queued), after a tool result (``after_tool``), between commit and claim
  (``claim``, inline and in the Celery worker), while writing a post-turn compaction.

After the restart, with no request made, every run that was active ends (the reaper's
work: ``NETA_RUN_STALE_SECONDS`` + one period, or at once for a process known gone; the
wait allows a busy machine far more, and a restarted server's 600 s staleness cannot be
what ends them); then every accepted prompt is in the tree with a reply, every
tool call has a result, Pi (the oracle) reads every export, and each session answers a
new prompt.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.deployment import Deployment
from tests.support.services import require, require_mariadb_and_redis, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

STALE_SECONDS = 4
REAPER_SECONDS = 1
CLAIM_SECONDS = 4
RECOVERY_SLACK = 30  # the reaper round itself, on a loaded machine (a wait, not a measure)

RULES = {
    "version": 1,
    "chunk_size": 0,
    "rules": [
        {"match": {"system": "context summarization assistant"}, "reply": [{"text": "## Goal\nRecovered summary."}]},
        {"match": {"contains": "slowly"}, "reply": [{"text": "tick " * 300, "chunk_size": 5, "delay_ms": 20}]},
        {"match": {"contains": "medium"}, "reply": [{"text": "tock " * 50, "chunk_size": 5, "delay_ms": 20}]},
        {
            "match": {"contains": "use the tool"},
            "replies": [
                [{"text": "Running it."}, {"tool_call": {"name": "bash", "arguments": {"command": "sleep 8; echo slept"}}}],
                [{"text": "The tool is done."}],
            ],
        },
        {
            "match": {"contains": "two tools"},
            "replies": [
                [
                    {"tool_call": {"name": "bash", "arguments": {"command": "echo one"}}},
                    {"tool_call": {"name": "bash", "arguments": {"command": "echo two"}}},
                ],
                [{"text": "Both ran."}],
            ],
        },
        {
            "match": {"contains": "stream a tool call"},
            "replies": [
                [{"tool_call": {"name": "write", "arguments": {"path": "big.txt", "content": "x" * 300}}, "chunk_size": 2, "delay_ms": 30}],
                [{"text": "Written."}],
            ],
        },
        {"match": {"contains": "fill the context"}, "reply": {"steps": [{"text": "A big answer."}], "usage": {"input": 120000, "output": 10}}},
    ],
    "default": {"reply": [{"text": "echo: {{user}}", "chunk_size": 4, "delay_ms": 5}]},
}

# Run once on this process's template: compaction on every turn, no session restored at start.
SEED = """
Agent.objects.filter(name="default").update(compaction_keep_recent_tokens=1, restore_last_session=False)
"""

RECOVERY_ENV = {
    "NETA_RUN_STALE_SECONDS": str(STALE_SECONDS),
    "NETA_REAPER_INTERVAL_SECONDS": str(REAPER_SECONDS),
    "NETA_RUN_CLAIM_SECONDS": str(CLAIM_SECONDS),
    # A streaming answer's checkpoint every second on Celery too (its default is 5 s): a
    # kill mid-stream waits for the first checkpoint (``wait_streaming``).
    "NETA_STREAM_SAVE_SECONDS": "1",
    "NETA_LOG_LEVEL": "WARNING",
}

ORACLE_LOCK = threading.Lock()  # the Pi oracle is not safe to run concurrently


@dataclass
class Accepted:
    session_id: str
    text: str
    queued_as: str | None


class CrashDeployment(Deployment):
    """A deployment whose server and worker are killed and restarted at will (one of each,
    named ``daphne`` and ``worker``), and what its clients were told."""

    def __init__(self, workdir: Path, **kwargs):
        env = {**RECOVERY_ENV, **kwargs.pop("extra_env", {})}
        super().__init__(workdir, servers=0, rules=RULES, seed="from runtime.models import Agent\n" + SEED, extra_env=env, **kwargs)
        self.accepted: list[Accepted] = []
        self.sessions: list[str] = []

    def start_daphne(self, **env) -> None:
        """The server as ``make run`` starts it (``python -m neta.serve``, Daphne underneath)."""
        self.start_server("daphne", **env)

    def start_celery(self, **env) -> None:
        """A Celery worker with two children."""
        self.start_worker("worker", concurrency=2, **env)

    # ------------------------------------------------------------------ clients

    def call(self, method: str, path: str, body: dict | None = None, raw: bool = False):
        status, payload = self.http("daphne", method, path, body, raw=True)
        return status, (payload if raw else json.loads(payload))

    def new_session(self) -> str:
        status, body = self.call("post", "/api/sessions/", {})
        assert status == 201, body
        self.sessions.append(body["sessionId"])
        return body["sessionId"]

    def prompt(self, session_id: str, text: str, mode: str = "follow_up", *, may_die: bool = False) -> dict:
        """Send a prompt. ``may_die``: the server may kill itself (a hook) before it answers;
        a prompt it committed counts as accepted all the same (and must be answered)."""
        try:
            status, body = self.call("post", f"/api/sessions/{session_id}/prompt/", {"text": text, "mode": mode})
        except (ConnectionError, OSError) as exc:
            if not may_die:
                raise
            committed = [r for r in self.runs() if r["session_id"] == session_id and r["prompt"] == text]
            assert committed, f"the server died before committing {text!r}: {exc!r}"
            self.accepted.append(Accepted(session_id, text, None))
            return {"run": {"runId": committed[0]["run_id"]}, "queuedAs": None}
        assert status == 202, body  # accepted: from here on it must be answered or refused with a reason
        self.accepted.append(Accepted(session_id, text, body["queuedAs"]))
        return body

    def run_of(self, session_id: str) -> dict | None:
        active = [r for r in self.runs() if r["session_id"] == session_id and r["status"] in ("queued", "running")]
        return active[0] if active else None

    def entries(self, session_id: str) -> list[dict]:
        status, text = self.call("get", f"/api/sessions/{session_id}/export/", raw=True)
        assert status == 200, text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def file_entries(self, session_id: str) -> list[dict]:
        """The session file as it is on disk now (file provider), read without any request."""
        found = list((self.workdir / "sessions").rglob(f"*{session_id}*.jsonl"))
        if not found:
            return []
        return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]

    # ------------------------------------------------------------------ waiting for a state

    def wait_streaming(self, session_id: str) -> None:
        """Until the run streams and a checkpoint of its answer is in the store."""
        wait_until(lambda: (self.run_of(session_id) or {}).get("in_flight"), 30, f"{session_id} to stream")
        wait_until(lambda: self.checkpointed(session_id), 30, f"a checkpoint of {session_id}'s answer")

    def wait_tool_running(self, session_id: str) -> None:
        def in_tool():
            for entry in self.file_entries(session_id):
                if entry.get("type") == "message" and entry["message"].get("stopReason") == "toolUse":
                    return True
            return False

        wait_until(in_tool, 30, f"{session_id} to run its tool")
        time.sleep(0.5)  # the tool's command has started (nothing outside the process says when)


def pi_reads(oracle, exports: list[Path]) -> None:
    """Pi reads every export: ``oracle context`` for each file, in one process (Pi loads once)."""
    jobs = exports[0].with_name("oracle-jobs.json")
    jobs.write_text(json.dumps([{"file": str(path)} for path in exports]))
    with ORACLE_LOCK:
        result = subprocess.run([str(oracle), "context-batch", str(jobs)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    read = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["index"] for line in read] == list(range(len(exports))), result.stdout[-2000:]
    for path, line in zip(exports, read):
        assert line["ok"], (path.name, line)
        assert line["result"]["messages"], path.name


def check_recovered(
    dep: CrashDeployment, oracle, was_active: set[str], ready_at: float, *, stale: int = STALE_SECONDS, exports: list[Path] | None = None
) -> None:
    """No request: the runs that were active at the kill end within stale + one period.
    ``exports``: add the sessions' exports to this list for the caller to have Pi read
    (``pi_reads``), rather than read them here."""
    deadline = ready_at + stale + REAPER_SECONDS + RECOVERY_SLACK

    def originals_terminal():
        rows = {r["run_id"]: r for r in dep.runs()}
        return all(rows[run_id]["status"] not in ("queued", "running") for run_id in was_active)

    wait_until(originals_terminal, max(0.1, deadline - time.monotonic()), "the runs active at the kill to end")
    # Runs carrying accepted prompts (and queued runs submitted again) now run to the end.
    wait_until(lambda: all(r["status"] not in ("queued", "running") for r in dep.runs()), 90, "every run to end")
    rows = dep.runs()
    for row in rows:
        if row["status"] in ("lost", "failed", "aborted"):
            assert row["error"], row  # a reason for every run that did not complete
    assert all(r["in_flight"] == "" for r in rows)

    for session_id in dep.sessions:
        entries = dep.entries(session_id)
        messages = {e["id"]: e for e in entries if e.get("type") == "message"}
        children: dict[str, list[str]] = {}
        for entry in entries[1:]:
            children.setdefault(entry.get("parentId"), []).append(entry["id"])

        def answered(entry_id: str) -> bool:
            todo = list(children.get(entry_id, []))
            while todo:
                child = todo.pop()
                if child in messages and messages[child]["message"]["role"] == "assistant":
                    return True
                todo.extend(children.get(child, []))
            return False

        for prompt in (a for a in dep.accepted if a.session_id == session_id):
            users = [e for e in messages.values() if e["message"]["role"] == "user" and e["message"]["content"][0]["text"] == prompt.text]
            assert users, f"accepted prompt {prompt.text!r} ({prompt.queued_as}) of {session_id} is not in the tree"
            assert any(answered(u["id"]) for u in users), f"accepted prompt {prompt.text!r} has no reply"
        calls = {b["id"] for e in messages.values() if e["message"]["role"] == "assistant" for b in e["message"]["content"] if b.get("type") == "toolCall"}
        results = {e["message"]["toolCallId"] for e in messages.values() if e["message"]["role"] == "toolResult"}
        assert calls <= results, f"tool calls without a result in {session_id}: {calls - results}"
        exported = dep.workdir / f"{session_id}.jsonl"
        exported.write_text("".join(json.dumps(e) + "\n" for e in entries))
    files = [dep.workdir / f"{session_id}.jsonl" for session_id in dep.sessions]
    if exports is None:
        pi_reads(oracle, files)
    else:
        exports.extend(files)

    # Each session takes a new prompt.
    for session_id in dep.sessions:
        run_id = dep.prompt(session_id, f"after recovery {session_id[-6:]}")["run"]["runId"].replace("-", "")
        wait_until(lambda: {r["run_id"].replace("-", ""): r for r in dep.runs()}[run_id]["status"] not in ("queued", "running"), 30, "the new prompt")
        row = {r["run_id"].replace("-", ""): r for r in dep.runs()}[run_id]
        assert row["status"] == "completed", row


def active_run_ids(dep: CrashDeployment) -> set[str]:
    return {r["run_id"] for r in dep.runs() if r["status"] in ("queued", "running")}


# --------------------------------------------------------------------------- inline: Daphne


def inline_deployment(workdir: Path, **env) -> CrashDeployment:
    """The embedded default: SQLite, the inline backend, the file provider."""
    deployment = CrashDeployment(workdir, extra_env=env)
    deployment.prepare()
    return deployment


def celery_deployment(workdir: Path, **env) -> CrashDeployment:
    """MariaDB, Redis, the Celery backend."""
    require_mariadb_and_redis()
    deployment = CrashDeployment(workdir, database="mysql", redis=True, backend="celery", extra_env=env)
    deployment.prepare()
    return deployment


def test_inline_server_killed_with_streams_tools_and_queued_runs(tmp_path, oracle):
    """One kill, seven points: two streams, a tool, a streamed tool call, two queued runs,
    a follow-up and a steer on dying runs."""
    require(shutil.which("bash") is not None, "bash missing")
    dep = inline_deployment(tmp_path / "inline", NETA_INLINE_WORKERS="3")
    try:
        dep.start_daphne()
        stream, tool, tool_call, queued_a, queued_b = (dep.new_session() for _ in range(5))
        dep.prompt(stream, "answer slowly please")
        dep.prompt(tool, "use the tool now")
        dep.prompt(tool_call, "stream a tool call")
        assert dep.prompt(queued_a, "quick one while busy")["queuedAs"] is None
        dep.prompt(queued_b, "another quick one")
        dep.wait_streaming(stream)
        dep.wait_tool_running(tool)
        dep.wait_streaming(tool_call)
        assert dep.prompt(stream, "a follow-up for the dying run")["queuedAs"] == "follow_up"
        assert dep.prompt(tool, "steer the dying run", mode="steer")["queuedAs"] == "steer"
        statuses = {r["session_id"]: r["status"] for r in dep.runs()}
        assert statuses[queued_a] == statuses[queued_b] == "queued"  # three workers, five runs
        was_active = active_run_ids(dep)
        dep.kill("daphne")
        # A heartbeat timeout far beyond the deadline below: the restarted server must
        # recognise its dead predecessor's runs by their process, at start-up.
        dep.start_daphne(NETA_RUN_STALE_SECONDS="600")
        check_recovered(dep, oracle, was_active, time.monotonic(), stale=0)
        assert "stopped responding" not in " ".join(r["error"] for r in dep.runs())
    finally:
        dep.close()


HOOKS = [
    # (NETA_TEST_KILL_AT, the prompt, queue a follow-up on the dying run)
    ("stream_start", "before the first token", False),
    ("finalize", "medium length answer", True),
    ("after_tool", "two tools please", False),
    ("claim", "killed between commit and claim", False),
    ("compaction", "fill the context", False),
]


def _hook_scenario(workdir: Path, oracle, point: str, text: str, follow_up: bool, exports: list[Path]) -> None:
    dep = inline_deployment(workdir, NETA_TEST_KILL_AT=point)
    try:
        dep.start_daphne()
        session = dep.new_session()
        dep.prompt(session, text, may_die=True)
        if follow_up:
            assert dep.prompt(session, f"follow-up queued before {point}")["queuedAs"] == "follow_up"
        was_active = active_run_ids(dep)
        dep.wait_dead("daphne")
        assert f"NETA_TEST_KILL_AT={point}" in dep.log("daphne")
        dep.env.pop("NETA_TEST_KILL_AT")
        dep.start_daphne()
        check_recovered(dep, oracle, was_active, time.monotonic(), exports=exports)
    finally:
        dep.close()


def test_inline_server_killing_itself_at_named_points(tmp_path, oracle):
    """Five deployments side by side, each killed at its point, restarted, checked; then
    Pi reads every deployment's exports."""
    exports: list[Path] = []
    with ThreadPoolExecutor(max_workers=len(HOOKS)) as pool:
        futures = {point: pool.submit(_hook_scenario, tmp_path / point, oracle, point, text, fu, exports) for point, text, fu in HOOKS}
    failures = {}
    for point, future in futures.items():
        try:
            future.result()
        except Exception as exc:  # report every point, not only the first
            failures[point] = exc
    assert not failures, "\n".join(f"{point}: {exc!r}" for point, exc in failures.items())
    assert len(exports) == len(HOOKS)  # one session each
    pi_reads(oracle, exports)


# --------------------------------------------------------------------------- distributed: Celery


def test_celery_worker_killed_at_claim_mid_stream_and_mid_tool(tmp_path, oracle):
    dep = celery_deployment(tmp_path / "cluster")
    try:
        dep.start_daphne()
        # 1. The worker takes the task and dies before claiming the run.
        dep.start_celery(NETA_TEST_KILL_AT="claim")
        claimed = dep.new_session()
        dep.prompt(claimed, "killed between commit and claim")
        wait_until(lambda: "NETA_TEST_KILL_AT=claim" in dep.log("worker"), 30, "the worker child to kill itself")
        dep.kill("worker")
        assert dep.run_of(claimed)["status"] == "queued"
        # 2. A new worker; two runs on its two children, a third queued behind them.
        dep.start_celery()
        stream, tool, queued = dep.new_session(), dep.new_session(), dep.new_session()
        dep.prompt(stream, "answer slowly please")
        dep.prompt(tool, "use the tool now")
        dep.wait_streaming(stream)
        dep.wait_tool_running(tool)
        dep.prompt(queued, "quick one while busy")
        assert dep.prompt(stream, "a follow-up for the dying run")["queuedAs"] == "follow_up"
        was_active = active_run_ids(dep)
        dep.kill("worker")
        dep.start_celery(NETA_RUN_STALE_SECONDS="600")  # its dead children's runs: by their process, at start-up
        check_recovered(dep, oracle, was_active, time.monotonic(), stale=0)
        assert "stopped responding" not in " ".join(r["error"] for r in dep.runs())
    finally:
        dep.close()


def test_celery_runs_waiting_behind_busy_workers_are_not_failed(tmp_path):
    """More prompts than worker children, each longer than three claim periods: the runs
    waiting in the queue are not lost tasks (the workers are busy), so the reaper neither
    submits them again nor fails them "never started"; every one completes."""
    dep = celery_deployment(tmp_path / "cluster", NETA_RUN_CLAIM_SECONDS="2")
    try:
        dep.start_daphne()
        dep.start_celery()  # two children
        sessions = [dep.new_session() for _ in range(4)]
        for session_id in sessions:
            dep.prompt(session_id, "use the tool now")  # a bash sleep of 8 s: > 3 claim periods
        wait_until(lambda: all(r["status"] not in ("queued", "running") for r in dep.runs()), 120, "every run to end")
        rows = dep.runs()
        assert [r["status"] for r in rows] == ["completed"] * 4, [(r["status"], r["error"]) for r in rows]
    finally:
        dep.close()


def test_the_server_says_at_start_up_that_commands_run_unsandboxed(tmp_path):
    """Where bubblewrap is missing, ``auto`` falls back to ``none``: the server's log says so
    when it starts, not only once the first command has run."""
    dep = inline_deployment(tmp_path / "nobwrap", NETA_SANDBOX_BWRAP=str(tmp_path / "no-such-bwrap"))
    try:
        dep.start_daphne()
        wait_until(lambda: "WITHOUT a sandbox" in dep.log("daphne"), 30, "the sandbox warning in the server's log")
    finally:
        dep.close()
