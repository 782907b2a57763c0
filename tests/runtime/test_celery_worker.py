"""The celery backend with real parts: a Celery worker process, Redis, MariaDB.

Everything runs as separate processes sharing one MariaDB database, exactly as a
distributed deployment would: the prompt is posted (the task is enqueued after commit),
the worker runs the turn. The first test runs on the shared ``distributed`` deployment
with an agent of its own; the second SIGKILLs a worker mid-stream, on a deployment of
its own, and shows the reaper finalizing the run and its in-flight entry.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.deployment import Deployment
from tests.support.services import require_mariadb_and_redis, wait_until

pytestmark = pytest.mark.slow

SLOW_RULES = {
    "version": 1,
    "rules": [{"match": "slow", "reply": [{"text": "tick " * 400, "delay_ms": 25, "chunk_size": 5}]}],
    "default": {"replies": [[{"thinking": "Looking first."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Done: {{user}}"}]]},
}


def test_a_turn_runs_on_a_real_celery_worker(distributed):
    agent = distributed.add_agent(f"celery-{uuid.uuid4().hex[:6]}", SLOW_RULES)
    session_id, run_id = distributed.prompt("what is in the workspace?", agent=agent)
    row = distributed.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"))
    assert row["status"] == "completed", row
    assert row["worker"]  # claimed by the worker process
    assert f".> {distributed.queue} " in distributed.log("runs")  # NETA_CELERY_QUEUE, both sides
    lines = distributed.export(session_id)
    assert lines[0]["type"] == "session"
    messages = [line["message"] for line in lines if line["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[1]["content"][1]["name"] == "ls"
    assert messages[-1]["content"][0]["text"] == "Done: what is in the workspace?"
    # The console's health sees the worker on its queue, with its reaper's last pass as heartbeat,
    # and names a subagent queue no worker consumes.
    nobody = f"{distributed.name}-nobody"
    health = json.loads(distributed.python(
        "import json; from runtime.runs.health import celery_status; print(json.dumps(celery_status(timeout=3)))",
        env={"NETA_SUBAGENT_QUEUE": nobody},
    ).strip().splitlines()[-1])  # fmt: skip
    [worker] = health["queues"][distributed.queue]
    # Matched by its node name (-n name-runs@host), which its own beats record.
    assert worker["worker"].startswith(f"{distributed.name}-runs@") and worker["lastHeartbeat"]
    assert isinstance(health["depths"][distributed.queue], int) and "oldestQueuedSeconds" in health
    assert health["queues"][nobody] == [] and health["ok"] is False and nobody in health["detail"]


def test_killing_the_worker_mid_run_is_recovered_by_the_reaper(tmp_path):
    """A deployment of its own: its worker is killed."""
    require_mariadb_and_redis()
    # A checkpoint of the streaming answer every second (the Celery default is 5 s): the kill
    # waits for the first one.
    with Deployment(
        tmp_path / "deployment", servers=0, database="mysql", redis=True, backend="celery", rules=SLOW_RULES,
        extra_env={"NETA_STREAM_SAVE_SECONDS": "1"},
    ) as deployment:  # fmt: skip
        deployment.start_worker("runs", pool="solo")
        session_id, run_id = deployment.prompt("slow please")
        deployment.wait_run(run_id, lambda r: r["status"] == "running" and r["in_flight"])
        wait_until(lambda: deployment.checkpointed(session_id), 30, "a checkpoint of the answer in the database")
        deployment.kill("runs")
        assert deployment.run_row(run_id)["status"] == "running"  # nobody finalized it
        out = deployment.manage("runtime_reap")  # the worker's process is gone from this host: no need to wait for staleness
        assert "1 run(s) reaped" in out
        row = deployment.run_row(run_id)
        assert row["status"] == "lost" and "is gone (process" in row["error"]  # the killed process is recognised on this host
        messages = [line["message"] for line in deployment.export(session_id) if line["type"] == "message"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        reply = messages[-1]
        assert reply["stopReason"] == "aborted"
        text = reply["content"][0]["text"]
        assert text.startswith("tick tick") and len(text) < len("tick " * 400)
