"""Subagent host figures with the scripted model.

    python -m bench.subagents [--batches N] [--served embedded,celery | --served none] [--rounds N] [--flood]

In this process (embedded backend): spawn → ``run_start`` p50/p95 (the claim to the
child's first event; target p50 ≤ 1 s), spawn → first ``tool_result`` and → ``run_end``,
child event → stream sink p95 (the child's timestamp to the host's publish), host time
per event (a child's wall time on the host beyond its own clock, per event it sent), and
an 8-way batch's wall time against its slowest child.

Served (real processes, ``tests/support/deployment.py``): *embedded* is one Daphne (SQLite,
in-memory channel layer, children supervised by the web process); *celery* is one
Daphne, a Celery worker for runs and one for ``NETA_SUBAGENT_QUEUE`` (prefork, 8
processes, prefetch 1), MariaDB and Redis. Printed: child event → websocket client p50/p95
(the child's ``ts`` to the client's receipt; target p95 ≤ 500 ms) over 8-way batches, and
a parent abort (REST) with 8 running children: abort → each child terminal (``endedAt``)
p50/p95/worst (target p95 ≤ 3 s, worst ≤ 10 s) and the processes left in the children's
process groups afterwards (target 0). Throw-away state; never the user's data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

FLOOD = {"on": False}  # --flood: the served runs add a flooding child (set by main)

STATE = tempfile.mkdtemp(prefix="neta-bench-subagents-")
os.environ.update({"NETA_VAR_DIR": STATE, "NETA_TASK_BACKEND": "inline", "NETA_LOG_LEVEL": "WARNING", "NETA_SANDBOX": "none"})
os.environ.pop("NETA_DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from runtime.models import Agent, ModelConfig, SubprocessEvent, SubprocessRun  # noqa: E402
from runtime.runs.prompts import session_prompt  # noqa: E402
from runtime.runs.turn import execute_run  # noqa: E402
from runtime.sessions.services import session_start  # noqa: E402

CHILD = {
    "version": 1, "delay_ms": 0, "chunk_size": 4, "rules": [],
    "default": {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "word " * 400}]]},
}  # fmt: skip


def parent_rules(n: int) -> dict:
    tasks = [{"agent": "child", "task": f"task {i}"} for i in range(n)]
    return {
        "version": 1, "delay_ms": 0, "rules": [],
        "default": {"replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": tasks}}}], [{"text": "done"}]]},
    }  # fmt: skip


def agent(name: str, rules: dict, **fields) -> Agent:
    workspace = os.path.join(STATE, "workspace")
    os.makedirs(workspace, exist_ok=True)
    model = ModelConfig.objects.create(name=f"{name}-m", provider_kind="scripted", provider_name="scripted", model_id="bench", options={"rules": rules})
    return Agent.objects.create(name=name, model=model, cwd=workspace, compaction_enabled=False, **fields)


class Probe:
    def __init__(self):
        self.lags: list[float] = []
        self.lock = threading.Lock()

    def emit(self, session_id, event):
        if event["type"] == "subagent_event":
            with self.lock:
                self.lags.append(time.time() * 1000 - event["event"]["ts"])


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def batch(parent: Agent, probe: Probe):
    session_id = session_start(agent=parent).session_id
    run = session_prompt(actor=None, session_id=session_id, text="go", dispatch=False).run
    finished = execute_run(run.run_id, sink=probe)
    assert finished.status == "completed", finished.error
    return list(SubprocessRun.objects.filter(parent_run=finished))


SERVED_RULES = {
    "version": 1, "chunk_size": 8, "delay_ms": 15,
    "rules": [
        {"match": "stream batch", "replies": [
            [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [{"agent": "default", "task": f"stream {i}"} for i in range(8)]}}}],
            [{"text": "done"}]]},
        {"match": "hold batch", "replies": [
            [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [{"agent": "default", "task": f"hold {i}"} for i in range(8)]}}}],
            [{"text": "never"}]]},
        {"match": "flood batch", "replies": [
            [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [{"agent": "default", "task": "flood"}, {"agent": "default", "task": "stream beside"}]}}}],
            [{"text": "done"}]]},
        # A child flooding output as fast as it can: 150 rounds of 10 KB of text in 4-character
        # deltas and a tool call (each round: deltas, a message, a call and a result), then ~1 MB.
        {"match": "flood", "replies": [
            *[{"steps": [{"text": "word " * 2_000}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], "chunk_size": 4, "delay_ms": 0}] * 150,
            {"steps": [{"text": "word " * 200_000}], "chunk_size": 4, "delay_ms": 0}]},
        {"match": "hold", "reply": [{"text": "Holding."}, {"pause_ms": 120000}, {"text": "never"}]},
    ],
    "default": {"replies": [[{"text": "Looking."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "word " * 80}]]},
}  # fmt: skip
SERVED_POLICY = {"enabled": True, "agents": ["default"], "max_concurrency": 8, "child_budget": {"max_turns": 200, "max_tool_calls": 200}}
TERMINAL = ("completed", "failed", "aborted")


def group_members(pgid: int) -> int:
    """Processes in the process group ``pgid`` (a child leads its own: its pid)."""
    import subprocess

    return len(subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False).stdout.split())


async def _socket(cluster, session_id: str, frames: list, subscribed) -> None:
    import json

    import websockets

    async with websockets.connect(
        cluster.ws_url(0, session_id), additional_headers={"Authorization": f"Token {cluster.token}"},
        origin=cluster.origin(0), max_size=None, ping_interval=None,
    ) as ws:  # fmt: skip
        await ws.send(json.dumps({"type": "subscribe"}))
        async for raw in ws:
            frame = json.loads(raw)
            frames.append((time.time() * 1000, frame))
            if frame.get("type") == "subscribed":
                subscribed.set()


async def _served_rounds(cluster, rounds: int) -> dict:
    import asyncio
    from datetime import datetime

    def http(method, path, body=None):
        status, answer = cluster.http(0, method, path, body)
        assert status < 300, (status, answer)
        return answer

    async def until(predicate, timeout=180.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await asyncio.to_thread(predicate)
            if value:
                return value
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{what} not reached within {timeout} s")

    async def open_session():
        sid = (await asyncio.to_thread(http, "post", "/api/sessions/", {"title": "bench"}))["sessionId"]
        frames, subscribed = [], asyncio.Event()
        reader = asyncio.create_task(_socket(cluster, sid, frames, subscribed))
        await asyncio.wait_for(subscribed.wait(), 60)
        return sid, frames, reader

    def ended(run_id: str) -> bool:
        return http("get", f"/api/runs/{run_id}/")["status"] in TERMINAL

    def children(sid: str) -> list[dict]:
        return http("get", f"/api/sessions/{sid}/subagent-runs/")

    def eight_running(sid: str):
        rows = children(sid)
        return rows if sum(1 for r in rows if r["status"] == "running" and r["pid"]) == 8 else None

    def all_ended(sid: str):
        rows = children(sid)
        return rows if rows and all(r["endedAt"] and r["status"] not in ("running", "cancelling") for r in rows) else None

    lags, stops, left, statuses, flood = [], [], [], set(), []
    if FLOOD["on"]:
        for _ in range(rounds):
            sid, frames, reader = await open_session()
            run_id = (await asyncio.to_thread(http, "post", f"/api/sessions/{sid}/prompt/", {"text": "flood batch"}))["run"]["runId"]
            await until(lambda run_id=run_id: ended(run_id), what="the flooding batch")
            await asyncio.sleep(0.5)  # the last frames
            flood += [at - f["event"]["ts"] for at, f in frames if f.get("type") == "subagent_event"]
            reader.cancel()
        return {"flood": flood}
    for _ in range(rounds):
        sid, frames, reader = await open_session()
        run_id = (await asyncio.to_thread(http, "post", f"/api/sessions/{sid}/prompt/", {"text": "stream batch"}))["run"]["runId"]
        await until(lambda run_id=run_id: ended(run_id), what="the streaming batch")
        await asyncio.sleep(0.5)  # the last frames
        lags += [at - f["event"]["ts"] for at, f in frames if f.get("type") == "subagent_event"]
        reader.cancel()
        sid, frames, reader = await open_session()
        run_id = (await asyncio.to_thread(http, "post", f"/api/sessions/{sid}/prompt/", {"text": "hold batch"}))["run"]["runId"]
        running = await until(lambda sid=sid: eight_running(sid), what="8 running children")
        await asyncio.sleep(0.3)  # every child inside its model call
        aborted_at = time.time()
        await asyncio.to_thread(http, "post", f"/api/sessions/{sid}/abort/")
        done = await until(lambda sid=sid: all_ended(sid), what="every child terminal")
        stops += [datetime.fromisoformat(r["endedAt"]).timestamp() - aborted_at for r in done]
        statuses |= {r["status"] for r in done}
        await until(lambda run_id=run_id: ended(run_id), what="the parent's end")
        left.append(sum(group_members(r["pid"]) for r in running))
        reader.cancel()
    return {"lags": lags, "stops": stops, "left": left, "statuses": sorted(statuses)}


def served(mode: str, rounds: int) -> None:
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.deployment import Deployment as Cluster
    from tests.support.deployment import cleanup_workdir
    from tests.support.services import mariadb_available, redis_available

    celery = mode == "celery"
    if celery and not (mariadb_available() and redis_available()):
        print(f"  served {mode}: skipped (MariaDB or Redis not reachable)")
        return
    workdir = Path(tempfile.mkdtemp(prefix=f"neta-bench-subagents-{mode}-"))
    queue = f"neta-bench-sub-{os.getpid()}"
    cluster = Cluster(
        workdir, servers=1, workers=1 if celery else 0, database="mysql" if celery else "sqlite", redis=celery,
        backend="celery" if celery else "inline", rules=SERVED_RULES, extra_env={"NETA_SANDBOX": "none", "NETA_SUBAGENT_QUEUE": queue},
    )  # fmt: skip
    try:
        with cluster:
            cluster.python(f"from runtime.models import Agent; Agent.objects.filter(name='default').update(subagent_policy={SERVED_POLICY!r})")
            if celery:
                cluster.start_worker("subworker", queues=queue, concurrency=8, options=("--prefetch-multiplier", "1"))
            out = asyncio.run(_served_rounds(cluster, rounds))
    finally:
        cleanup_workdir(workdir)
    if "flood" in out:
        lags = out["flood"]
        print(f"  served {mode:<8} flooding child: event → socket p50 / p95 ms   {statistics.median(lags):.0f} / {pct(lags, 0.95):.0f}"
              f"   ({len(lags)} frames; target p95 ≤ 300)")  # fmt: skip
        return
    lags, stops = out["lags"], out["stops"]
    print(f"  served {mode:<8} child event → socket p50 / p95 ms   {statistics.median(lags):.0f} / {pct(lags, 0.95):.0f}   ({len(lags)} frames; target p95 ≤ 500)")
    print(f"  served {mode:<8} abort → child terminal p50 / p95 / worst s   {statistics.median(stops):.2f} / {pct(stops, 0.95):.2f} / {max(stops):.2f}"
          f"   ({len(stops)} children in {rounds} aborts of 8; statuses {', '.join(out['statuses'])}; targets p95 ≤ 3, worst ≤ 10)")  # fmt: skip
    print(f"  served {mode:<8} processes left in the children's groups after the aborts   {sum(out['left'])}   (target 0)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--served", default="embedded,celery", help="served modes to measure (embedded, celery) or 'none'")
    parser.add_argument("--rounds", type=int, default=2, help="served: streaming batches and aborts per mode")
    parser.add_argument("--flood", action="store_true", help="served only: one child floods ~1 MB of tiny deltas beside one that streams")
    args = parser.parse_args()
    if args.flood:
        FLOOD["on"] = True
        for mode in [m for m in args.served.split(",") if m and m != "none"]:
            served(mode, args.rounds)
        return
    call_command("migrate", verbosity=0)
    agent("child", CHILD)
    eight = agent("parent8", parent_rules(8), subagent_policy={"enabled": True, "agents": ["child"], "max_concurrency": 8})
    probe = Probe()
    spawn, overhead, ratios, walls, first_tool, whole = [], [], [], [], [], []
    for _ in range(args.batches):
        rows = batch(eight, probe)
        for row in rows:
            events = list(SubprocessEvent.objects.filter(run=row).order_by("seq"))
            start_ts, end_ts = events[0].payload["ts"], events[-1].payload["ts"]
            spawn.append(start_ts - row.started_at.timestamp() * 1000)
            # Honest about lazy loading: the first tool result (model + tool code loaded) and the whole child.
            tool_ts = next(e.payload["ts"] for e in events if e.type == "tool_result")
            first_tool.append(tool_ts - row.started_at.timestamp() * 1000)
            whole.append(end_ts - row.started_at.timestamp() * 1000)
            host_ms = (row.ended_at - row.started_at).total_seconds() * 1000
            overhead.append(max(0.0, host_ms - (end_ts - start_ts) - spawn[-1]) / len(events))
        wall = (max(r.ended_at for r in rows) - min(r.created_at for r in rows)).total_seconds()
        slowest = max((r.ended_at - r.started_at).total_seconds() for r in rows)
        walls.append(wall)
        ratios.append(wall / slowest)
    print(f"# subagents bench, embedded backend, scripted model (state in {STATE})")
    print(f"  children                          {len(spawn)} ({args.batches} batches of 8, 8 at once)")
    print(f"  spawn → run_start p50 / p95 ms    {statistics.median(spawn):.0f} / {pct(spawn, 0.95):.0f}   (target p50 ≤ 1000)")
    print(f"  spawn → first tool_result p50 ms  {statistics.median(first_tool):.0f}; spawn → run_end p50 {statistics.median(whole):.0f}")
    print(f"  child event → sink p95 ms         {pct(probe.lags, 0.95):.0f}   ({len(probe.lags)} events; target ≤ 500 at the socket)")
    print(f"  host time per event ms (p50)      {statistics.median(overhead):.2f}")
    print(f"  8-way batch wall s (median)       {statistics.median(walls):.2f}; vs its slowest child x{statistics.median(ratios):.2f}")
    for mode in [m for m in args.served.split(",") if m and m != "none"]:
        served(mode, args.rounds)


if __name__ == "__main__":
    main()
