"""Runtime overhead with the scripted model at zero delay (issue 5's targets).

    python -m bench.runtime_turn

Prints: prompt → first streaming event (inline backend, file provider), runtime
overhead per streamed delta (a turn against the bare scripted stream of the same
content), and a 50-round tool loop's overhead per round beyond tool and model
time. Uses a throwaway state directory; never the user's data.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time

STATE = tempfile.mkdtemp(prefix="neta-bench-runtime-")
os.environ.update({"NETA_VAR_DIR": STATE, "NETA_TASK_BACKEND": "inline", "NETA_LOG_LEVEL": "WARNING"})
os.environ.pop("NETA_DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from runtime import llm  # noqa: E402
from runtime.agents.specs import model_spec  # noqa: E402
from runtime.models import Agent, AgentRun, ModelConfig  # noqa: E402
from runtime.realtime.sinks import InMemorySink  # noqa: E402
from runtime.runs.prompts import session_prompt  # noqa: E402
from runtime.runs.turn import execute_run  # noqa: E402
from runtime.sessions.services import session_start
from toolcatalog.protocol import ToolContext, get_tool, run_tool  # noqa: E402


def setup(script: dict, name: str) -> Agent:
    workspace = os.path.join(STATE, "workspace")
    os.makedirs(workspace, exist_ok=True)
    model = ModelConfig.objects.create(
        name=f"{name}-m", provider_kind="scripted", provider_name="scripted", model_id="bench", options={"rules": script}
    )
    return Agent.objects.create(name=name, model=model, cwd=workspace, compaction_enabled=False, max_tool_rounds=100)


class FirstEvent:
    def __init__(self):
        self.start = 0.0
        self.first: dict[str, float] = {}
        self.done = threading.Event()

    def emit(self, session_id, event):
        kind = event["type"]
        if kind not in self.first:
            self.first[kind] = time.perf_counter() - self.start
        if kind == "run_state" and event["state"] not in ("running",):
            self.done.set()


def bench_first_event(rounds: int = 30) -> dict:
    from runtime.realtime import sinks as streaming

    agent = setup({"version": 1, "delay_ms": 0, "rules": [], "default": {"reply": [{"text": "hello there"}]}}, "first")
    start_times, delta_times = [], []
    for _ in range(rounds):
        session_id = session_start(agent=agent).session_id
        probe = FirstEvent()
        previous = streaming.set_default_sink(probe)
        try:
            probe.start = time.perf_counter()
            session_prompt(actor=None, session_id=session_id, text="hi")  # inline backend: thread pool, after commit
            probe.done.wait(10)
        finally:
            streaming.set_default_sink(previous)
        start_times.append(probe.first["assistant_stream_start"] * 1000)
        delta_times.append(probe.first["assistant_stream_delta"] * 1000)
    return {
        "to stream start p50 ms": statistics.median(start_times),
        "to first delta p50 ms": statistics.median(delta_times),
        "to first delta p95 ms": sorted(delta_times)[int(0.95 * (len(delta_times) - 1))],
    }


def bench_per_delta(deltas: int = 20000) -> dict:
    text = "x" * deltas
    script = {"version": 1, "delay_ms": 0, "chunk_size": 1, "rules": [], "default": {"reply": [{"text": text}]}}
    small = {"version": 1, "delay_ms": 0, "chunk_size": 1, "rules": [], "default": {"reply": [{"text": "x"}]}}
    agent, agent_small = setup(script, "deltas"), setup(small, "one-delta")

    def turn(a) -> float:
        session_id = session_start(agent=a).session_id
        outcome = session_prompt(actor=None, session_id=session_id, text="go", dispatch=False)
        started = time.perf_counter()
        execute_run(outcome.run.run_id, sink=InMemorySink())
        return time.perf_counter() - started

    def bare() -> float:
        spec = model_spec(agent.model)
        request = llm.LlmRequest(system_prompt="", messages=[{"role": "user", "content": "go", "timestamp": 0}], tools=[])
        started = time.perf_counter()
        for _ in llm.stream(spec, request):
            pass
        return time.perf_counter() - started

    turn_big = min(turn(agent) for _ in range(3))
    turn_small = min(turn(agent_small) for _ in range(3))
    stream_only = min(bare() for _ in range(3))
    overhead = (turn_big - turn_small - stream_only) / deltas
    return {
        "deltas": deltas,
        "turn s": turn_big,
        "bare stream s": stream_only,
        "fixed turn cost ms": turn_small * 1000,
        "runtime overhead per delta ms": overhead * 1000,
    }


def bench_tool_loop(rounds: int = 50) -> dict:
    tool_step = {"tool_call": {"name": "ls", "arguments": {"path": "."}}}
    script = {"version": 1, "delay_ms": 0, "rules": [], "default": {"replies": [[tool_step]] * rounds + [[{"text": "done"}]]}}
    agent = setup(script, "loop")
    session_id = session_start(agent=agent).session_id
    outcome = session_prompt(actor=None, session_id=session_id, text="loop", dispatch=False)
    started = time.perf_counter()
    execute_run(outcome.run.run_id, sink=InMemorySink())
    total = time.perf_counter() - started
    run = AgentRun.objects.get(pk=outcome.run.pk)
    assert run.rounds == rounds, (run.status, run.error)
    # Tool time: the same tool, the same number of times, outside the runtime.
    ctx = ToolContext(roots=(agent.cwd,))
    tool = get_tool("ls")
    t0 = time.perf_counter()
    for _ in range(rounds):
        run_tool(tool, ctx, {"path": "."})
    tool_time = time.perf_counter() - t0
    # Model time: the scripted stream of one tool-call reply, times the rounds.
    spec = model_spec(agent.model)
    request = llm.LlmRequest(system_prompt="", messages=[{"role": "user", "content": "loop", "timestamp": 0}], tools=[])
    t0 = time.perf_counter()
    for _ in range(rounds + 1):
        for _ in llm.stream(spec, request):
            pass
    model_time = time.perf_counter() - t0
    return {
        "rounds": rounds,
        "total s": total,
        "tool s": tool_time,
        "model s": model_time,
        "overhead per round ms": (total - tool_time - model_time) / rounds * 1000,
    }


def main() -> None:
    call_command("migrate", verbosity=0)
    print(f"# runtime bench (state in {STATE})")
    for name, fn in (("prompt → first event", bench_first_event), ("per delta", bench_per_delta), ("tool loop", bench_tool_loop)):
        figures = fn()
        print(f"\n## {name}")
        for key, value in figures.items():
            print(f"  {key:32} {value:.3f}" if isinstance(value, float) else f"  {key:32} {value}")
    sys.stdout.flush()
    os._exit(0)  # inline worker threads are daemonic enough; do not wait on the pool


if __name__ == "__main__":
    main()
