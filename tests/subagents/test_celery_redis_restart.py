"""Redis going away during a Celery-hosted batch, two ways: every Redis connection of this
deployment's workers (broker, result and channel-layer clients) killed with ``CLIENT KILL``
on the shared server; and a real restart — a redis-server of the test's own (free port,
append-only file) SIGKILLed while the children run and started again. Either way every
child run ends in a recorded terminal state and the parent turn finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.subagents.celery_helpers import children, delegating_rules, own_deployment, terminal_events, wait_running_children

pytestmark = pytest.mark.slow

# Children that take a while: Redis goes away while both run.
SLOW_CHILDREN = delegating_rules("default", {"replies": [
    [{"pause_ms": 4000}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}],
    [{"pause_ms": 2000}, {"text": "Child done: {{user}}"}],
]})  # fmt: skip
TERMINAL = {"completed", "partial", "failed", "cancelled", "timed_out", "lost"}
REDIS_PORT = 6379


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def redis_client_addrs(pids: set[int]) -> set[str]:
    """``ip:port`` (as Redis's CLIENT LIST shows them) of the TCP connections to Redis held by ``pids``."""
    inodes = set().union(*(socket_inodes(p) for p in pids)) if pids else set()
    addrs = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], int(fields[9])
            if int(remote.split(":")[1], 16) == REDIS_PORT and inode in inodes:
                ip_hex, port_hex = local.split(":")
                ip = ".".join(str(int(ip_hex[i : i + 2], 16)) for i in (6, 4, 2, 0))
                addrs.add(f"{ip}:{int(port_hex, 16)}")
    return addrs


def group_pids(*pgids: int) -> set[int]:
    found = set()
    for pgid in pgids:
        out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
        found |= {int(p) for p in out.split()}
    return found


def kill_worker_connections(*workers) -> int:
    import redis

    client = redis.Redis(host="127.0.0.1", port=REDIS_PORT)
    try:
        addrs = redis_client_addrs(group_pids(*(w.pid for w in workers)))
        known = {info["addr"] for info in client.client_list()}
        killed = 0
        for addr in addrs & known:
            try:
                killed += bool(client.client_kill(addr))
            except redis.ResponseError:  # already gone
                pass
        return killed
    finally:
        client.close()


def test_a_redis_restart_during_a_celery_batch_ends_every_child_recorded_and_the_parent_finishes(tmp_path):
    deployment = own_deployment(tmp_path / "deployment", 2, SLOW_CHILDREN)
    try:
        runs, subs = deployment.processes["runs"], deployment.processes["subagents"]
        session_id, run_id = deployment.prompt("please delegate")
        wait_running_children(deployment, session_id, 2, timeout=90)
        # The "restart": every connection of both workers to Redis is dropped, twice, a second apart.
        killed = kill_worker_connections(runs, subs)
        assert killed > 0  # the provocation happened
        time.sleep(1)
        kill_worker_connections(runs, subs)

        row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=150, logs=("runs", "subagents"))
        logs = deployment.log("runs")[-3000:] + deployment.log("subagents")[-3000:]
        assert row["status"] == "completed", (row, logs)
        rows = children(deployment, session_id, "status, error_code, final_text, ended_at")
        assert len(rows) == 2 and all(c[0] in TERMINAL and c[3] is not None for c in rows), (rows, logs)
        # Each child's terminal state is recorded as exactly one terminal event.
        assert terminal_events(deployment, session_id) == [1, 1]
        assert [c[0] for c in rows] == ["completed", "completed"], (rows, logs)
        assert [c[2] for c in rows] == ["Child done: first look", "Child done: second look"]
        lines = deployment.export(session_id)
        kinds = [line["type"] if line["type"] != "message" else line["message"]["role"] for line in lines[1:]]
        kinds = [k for k in kinds if k not in ("model_change", "thinking_level_change")]
        # ..., then the title the session gives itself after its first answer (runs/titles.py).
        assert kinds == ["user", "assistant", "subagent_batch", "subagent_result", "subagent_result", "toolResult", "assistant", "session_info"]
    finally:
        deployment.close()


class OwnRedis:
    """A redis-server of this test alone (a free port, its own directory, append-only file
    fsynced always): it can really be killed and started again without touching anyone's."""

    def __init__(self, tmp):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tmp / "redis"
        self.dir.mkdir()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis(port=self.port, socket_connect_timeout=0.5).ping():
                    return
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline and self.process.poll() is None, (self.dir / "redis.log").read_text()[-2000:]
            time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def test_a_real_redis_restart_during_a_celery_batch_ends_every_child_recorded_and_the_parent_finishes(tmp_path):
    """The deployment's Redis (broker, results, channel layer) is a server of its own, SIGKILLed
    while two children run and started again on the same port a second later."""
    own = OwnRedis(tmp_path)
    own.start()
    deployment = None
    try:
        deployment = own_deployment(tmp_path / "deployment", 2, SLOW_CHILDREN, env={"NETA_REDIS_URL": own.url, "NETA_CELERY_BROKER_URL": own.url})
        session_id, run_id = deployment.prompt("please delegate")
        running = wait_running_children(deployment, session_id, 2, timeout=90)
        own.kill()  # the restart: the server dies (SIGKILL) …
        time.sleep(1)
        own.start()  # … and comes back on the same port with its append-only file

        row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=150, logs=("runs", "subagents"))
        logs = deployment.log("runs")[-3000:] + deployment.log("subagents")[-3000:]
        assert row["status"] == "completed", (row, logs)
        rows = children(deployment, session_id, "status, final_text, ended_at")
        assert [c[0] for c in rows] == ["completed", "completed"], (rows, logs)
        assert [c[1] for c in rows] == ["Child done: first look", "Child done: second look"]
        assert terminal_events(deployment, session_id) == [1, 1]
        assert not [pid for pid in running if group_pids(pid)]  # 0 orphans
        lines = deployment.export(session_id)
        kinds = [line["type"] if line["type"] != "message" else line["message"]["role"] for line in lines[1:]]
        kinds = [k for k in kinds if k not in ("model_change", "thinking_level_change")]
        assert kinds[:7] == ["user", "assistant", "subagent_batch", "subagent_result", "subagent_result", "toolResult", "assistant"]
        # The workers reconnected: a second prompt after the restart runs end to end.
        _, again = deployment.prompt("please delegate")
        assert deployment.wait_run(again, lambda r: r["status"] not in ("queued", "running"), timeout=150)["status"] == "completed"
    finally:
        if deployment is not None:
            deployment.close()
        own.kill()
