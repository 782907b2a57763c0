"""The celery backend with real parts: a Celery worker process, Redis, MariaDB.

Everything runs as separate processes sharing a fresh MariaDB database, exactly
as a distributed deployment would: `manage.py` commands set it up, a script
posts the prompt (the task is enqueued after commit), the worker runs the turn.
The second test SIGKILLs the worker mid-stream and shows the reaper finalizing
the run and its in-flight entry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO, require
from tests.support.databases import mariadb_migrated

pytestmark = pytest.mark.slow

SLOW_RULES = {
    "version": 1,
    "rules": [{"match": "slow", "reply": [{"text": "tick " * 400, "delay_ms": 25, "chunk_size": 5}]}],
    "default": {"replies": [[{"thinking": "Looking first."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Done: {{user}}"}]]},
}


MARIADB = {"host": "127.0.0.1", "user": "root", "port": 3306}


def _mysql():
    try:
        import MySQLdb

        return MySQLdb.connect(**MARIADB, charset="utf8mb4", autocommit=True)
    except Exception as exc:  # noqa: BLE001
        require(False, f"MariaDB not reachable: {exc}")


def _redis_ok() -> bool:
    import redis

    try:
        return redis.Redis.from_url("redis://127.0.0.1:6379/0").ping()
    except Exception:  # noqa: BLE001
        return False


class Deployment:
    def __init__(self, tmp: Path):
        require(_redis_ok(), "Redis not reachable on 127.0.0.1:6379")
        self.db = f"neta_celery_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.conn = _mysql()
        # What `migrate` and `neta_bootstrap` leave, copied from this process's template.
        mariadb_migrated(MARIADB, self.db, bootstrapped=True)
        redis_db = 13
        # A queue of its own: runs on one machine (CI and a developer's) never take each other's tasks.
        self.queue = f"neta-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.env = {
            **os.environ,
            "NETA_DATABASE_URL": f"mysql://root@127.0.0.1:3306/{self.db}",
            "NETA_REDIS_URL": f"redis://127.0.0.1:6379/{redis_db}",
            "NETA_CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{redis_db}",
            "NETA_TASK_BACKEND": "celery",
            "NETA_CELERY_QUEUE": self.queue,
            "NETA_VAR_DIR": str(tmp / "var"),
            "NETA_SESSIONS_DIR": str(tmp / "sessions"),
            "NETA_WORKSPACE_DIR": str(tmp / "workspace"),
            "NETA_RUN_STALE_SECONDS": "3",
        }
        self.env.pop("NETA_TEST_MYSQL_URL", None)
        self.tmp = tmp
        self.worker: subprocess.Popen | None = None
        self.set_rules(SLOW_RULES)

    def set_rules(self, rules: dict, *, subagent_policy: dict | None = None) -> None:
        """The scripted model answers by ``rules`` (a file its options name), as an admin's
        edit of the model (and of the default agent's subagent policy) would set them."""
        rules_file = self.tmp / "var" / "rules" / f"rules-{uuid.uuid4().hex[:6]}.json"  # NETA_SCRIPTED_RULES_DIR's default
        rules_file.parent.mkdir(parents=True, exist_ok=True)
        rules_file.write_text(json.dumps(rules))
        cursor = self.conn.cursor()
        cursor.execute(
            f"UPDATE `{self.db}`.runtime_modelconfig SET options = %s WHERE name = 'scripted-demo'",
            (json.dumps({"rules": str(rules_file)}),),
        )
        assert cursor.rowcount == 1
        if subagent_policy is not None:
            cursor.execute(f"UPDATE `{self.db}`.runtime_agent SET subagent_policy = %s WHERE name = 'default'", (json.dumps(subagent_policy),))
            assert cursor.rowcount == 1

    def manage(self, *args: str) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def python(self, code: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", "import django; django.setup();" + code],
            cwd=REPO,
            env={**self.env, "DJANGO_SETTINGS_MODULE": "neta.settings"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def start_worker(self) -> None:
        log = open(self.tmp / "worker.log", "w")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "neta", "worker", "-l", "info", "-P", "solo", "--without-gossip", "--without-mingle"],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "ready." in (self.tmp / "worker.log").read_text():
                return
            assert self.worker.poll() is None, (self.tmp / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        raise AssertionError("celery worker did not become ready:\n" + (self.tmp / "worker.log").read_text()[-3000:])

    def prompt(self, text: str) -> tuple[str, str]:
        out = self.python(
            "from runtime.sessions.services import session_start; from runtime.runs.prompts import session_prompt; from runtime.agents.selectors import default_agent;"
            "s = session_start(agent=default_agent());"
            f"o = session_prompt(actor=None, session_id=s.session_id, text={text!r});"
            "print(s.session_id, o.run.run_id)"
        )
        session_id, run_id = out.split()
        return session_id, run_id

    def run_row(self, run_id: str) -> dict:
        cursor = self.conn.cursor()
        cursor.execute(
            f"SELECT status, error, in_flight_entry_id, worker FROM `{self.db}`.runtime_agentrun WHERE REPLACE(run_id, '-', '') = %s",
            (run_id.replace("-", ""),),
        )
        status, error, in_flight, worker = cursor.fetchone()
        return {"status": status, "error": error, "in_flight": in_flight, "worker": worker}

    def wait_run(self, run_id: str, predicate, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        row = self.run_row(run_id)
        while time.monotonic() < deadline:
            row = self.run_row(run_id)
            if predicate(row):
                return row
            time.sleep(0.1)
        raise AssertionError(f"run {run_id} stuck at {row}; worker log:\n" + (self.tmp / "worker.log").read_text()[-3000:])

    def export(self, session_id: str) -> list[dict]:
        return [json.loads(line) for line in self.manage("session_export", session_id).splitlines()]

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=10)
        self.conn.cursor().execute(f"DROP DATABASE IF EXISTS `{self.db}`")
        self.conn.close()
        import redis

        broker = redis.Redis.from_url(self.env["NETA_CELERY_BROKER_URL"])
        for key in broker.scan_iter(match=f"{self.queue}*"):  # what the killed worker left queued
            broker.delete(key)


@pytest.fixture(scope="module")
def shared_deployment(tmp_path_factory):
    d = Deployment(tmp_path_factory.mktemp("deployment"))  # migrations once for the module
    yield d
    d.close()


@pytest.fixture
def deployment(shared_deployment):
    yield shared_deployment
    worker = shared_deployment.worker
    if worker is not None and worker.poll() is None:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)


def test_a_turn_runs_on_a_real_celery_worker(deployment):
    deployment.start_worker()
    session_id, run_id = deployment.prompt("what is in the workspace?")
    row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"))
    assert row["status"] == "completed", row
    assert row["worker"]  # claimed by the worker process
    assert f".> {deployment.queue} " in (deployment.tmp / "worker.log").read_text()  # NETA_CELERY_QUEUE, both sides
    lines = deployment.export(session_id)
    assert lines[0]["type"] == "session"
    messages = [line["message"] for line in lines if line["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[1]["content"][1]["name"] == "ls"
    assert messages[-1]["content"][0]["text"] == "Done: what is in the workspace?"
    # The console's health sees the worker on its queue, with its reaper's last pass as heartbeat,
    # and names the subagent queue no worker consumes.
    health = json.loads(deployment.python(
        "import json; from runtime.runs.health import celery_status; print(json.dumps(celery_status(timeout=3)))"
    ).strip().splitlines()[-1])
    [worker] = health["queues"][deployment.queue]
    assert worker["worker"].startswith("celery@") and worker["lastHeartbeat"]
    assert health["queues"]["subagents"] == [] and health["ok"] is False and "subagents" in health["detail"]


def test_killing_the_worker_mid_run_is_recovered_by_the_reaper(deployment):
    deployment.start_worker()
    session_id, run_id = deployment.prompt("slow please")
    deployment.wait_run(run_id, lambda r: r["status"] == "running" and r["in_flight"])
    time.sleep(1.6)  # let at least one checkpoint reach the database
    os.killpg(deployment.worker.pid, signal.SIGKILL)
    deployment.worker.wait(timeout=10)
    assert deployment.run_row(run_id)["status"] == "running"  # nobody finalized it
    time.sleep(3.5)  # the heartbeat goes stale (NETA_RUN_STALE_SECONDS=3)
    out = deployment.manage("runtime_reap")
    assert "1 run(s) reaped" in out
    row = deployment.run_row(run_id)
    assert row["status"] == "lost" and "is gone (process" in row["error"]  # the killed process is recognised on this host
    messages = [line["message"] for line in deployment.export(session_id) if line["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    reply = messages[-1]
    assert reply["stopReason"] == "aborted"
    text = reply["content"][0]["text"]
    assert text.startswith("tick tick") and len(text) < len("tick " * 400)
