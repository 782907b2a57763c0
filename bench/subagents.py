"""Subagent host figures with the scripted model, embedded (inline) backend (issue 14).

    python -m bench.subagents [--batches N]

Prints: spawn → ``run_start`` p50/p95 (the claim to the child's first event; target p50
≤ 1 s), child event → stream sink p95 (the child's timestamp to the host's publish; the
socket adds the gateway's own hop, see bench.gateway_fanout), host time per event (a
child's wall time on the host beyond its own clock, per event it sent), and an 8-way
batch's wall time against its slowest child. Throw-away state; never the user's data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
