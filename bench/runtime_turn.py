"""Runtime overhead with the scripted model at zero delay (bench/README.md, "Runtime turn").

    python -m bench.runtime_turn [section ...]   # sections: first, delta, loop, lean, concurrent, memory

Prints: prompt → first streaming event (inline backend, file provider), runtime
overhead per streamed delta (a turn against the bare scripted stream of the same
content), a 50-round tool loop's overhead per round beyond tool and model time;
then queries and CPU per 2-call turn (file and mysql provider),
turns/s of 50 concurrent sessions of a 2 s model through the inline backend, and
RSS per 1,000 sessions created. Uses a throwaway state directory (SQLite in WAL
mode, as embedded); never the user's data.
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
        if kind == "run_state" and event["state"] not in ("queued", "running"):  # every transition announces itself
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


TWO_CALLS = {"version": 1, "delay_ms": 0, "rules": [], "default": {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "done"}]]}}
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def bench_lean(turns: int = 200) -> dict:
    """Queries and CPU of a 2-call turn (one tool call, then the answer), prompt included."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    figures = {}
    for provider in ("file", "mysql"):
        agent = setup(TWO_CALLS, f"lean-{provider}")
        agent.session_provider = provider
        agent.save()

        def turn(session_id):
            outcome = session_prompt(actor=None, session_id=session_id, text="go", dispatch=False)
            run = execute_run(outcome.run.run_id, sink=InMemorySink())
            assert run.status == "completed", run.error

        session_id = session_start(agent=agent).session_id
        turn(session_id)  # warm: the catalog's rows, the index
        with CaptureQueriesContext(connection) as captured:
            turn(session_id)
        sql = [q["sql"] for q in captured.captured_queries]
        figures[f"{provider}: queries per turn (prompt + run)"] = sum(1 for q in sql if not q.upper().startswith(_CONTROL))
        figures[f"{provider}: transactions per turn"] = sum(1 for q in sql if q.upper().startswith("BEGIN"))
        sessions = [session_start(agent=agent).session_id for _ in range(20)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for i in range(turns):
            turn(sessions[i % len(sessions)])
        figures[f"{provider}: CPU per turn ms"] = (time.process_time() - cpu0) / turns * 1000
        figures[f"{provider}: wall per turn ms"] = (time.perf_counter() - wall0) / turns * 1000
    return figures


def bench_concurrent(sessions: int = 50, turns: int = 3, model_ms: int = 2000) -> dict:
    """``sessions`` clients, each prompting ``turns`` times in a row (the next prompt when
    its run ended), through the inline backend's pool, with a model taking ``model_ms``."""
    from runtime.realtime import sinks as streaming

    script = {"version": 1, "delay_ms": 0, "rules": [], "default": {"reply": [{"pause_ms": model_ms}, {"text": "done"}]}}
    agent = setup(script, f"concurrent-{sessions}")
    ids = [session_start(agent=agent).session_id for _ in range(sessions)]
    done = {sid: threading.Semaphore(0) for sid in ids}
    latencies: list[float] = []

    class Probe:
        def emit(self, session_id, event):
            if event.get("type") == "run_state" and event["state"] not in ("running", "queued"):
                done[session_id].release()

    def client(session_id):
        for _ in range(turns):
            started = time.perf_counter()
            session_prompt(actor=None, session_id=session_id, text="hi")
            if not done[session_id].acquire(timeout=120):
                raise RuntimeError(f"session {session_id}: no terminal run_state")
            latencies.append(time.perf_counter() - started)

    previous = streaming.set_default_sink(Probe())
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        threads = [threading.Thread(target=client, args=(sid,)) for sid in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        streaming.set_default_sink(previous)
    failed = AgentRun.objects.filter(session_id__in=ids).exclude(status="completed").count()
    total = sessions * turns
    latencies.sort()
    return {
        "sessions x turns": f"{sessions} x {turns} (model {model_ms} ms, {settings_workers()} inline workers)",
        "turns/s": total / wall,
        "turn p50 s": latencies[len(latencies) // 2],
        "turn p95 s": latencies[int(0.95 * (len(latencies) - 1))],
        "CPU per turn ms": cpu / total * 1000,
        "runs not completed": failed,
    }


def settings_workers() -> int:
    from django.conf import settings

    return settings.NETA_INLINE_WORKERS


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def bench_memory(sessions: int = 1000, turns: int = 1000) -> dict:
    """RSS growth per 1,000 sessions created, then per 1,000 turns (one per session)."""
    import gc

    agent = setup({"version": 1, "delay_ms": 0, "rules": [], "default": {"reply": [{"text": "ok"}]}}, "memory")
    for _ in range(50):  # warm: first-use imports and caches
        session_start(agent=agent)
    gc.collect()
    before = rss_kb()
    ids = [session_start(agent=agent).session_id for _ in range(sessions)]
    gc.collect()
    after_sessions = rss_kb()
    for i in range(turns):
        outcome = session_prompt(actor=None, session_id=ids[i % len(ids)], text="hi", dispatch=False)
        execute_run(outcome.run.run_id, sink=InMemorySink())
    gc.collect()
    after_turns = rss_kb()
    return {
        "RSS per 1,000 sessions created KB": (after_sessions - before) * 1000 / sessions,
        "RSS per 1,000 turns KB": (after_turns - after_sessions) * 1000 / turns,
    }


SECTIONS = {
    "first": ("prompt → first event", bench_first_event),
    "delta": ("per delta", bench_per_delta),
    "loop": ("tool loop", bench_tool_loop),
    "lean": ("2-call turn: queries and CPU", bench_lean),
    "concurrent": ("50 sessions x 2 s model, inline backend", bench_concurrent),
    "memory": ("memory", bench_memory),
}


def main() -> None:
    call_command("migrate", verbosity=0)
    print(f"# runtime bench (state in {STATE})")
    chosen = [a for a in sys.argv[1:] if not a.startswith("-") and a != "runtime_turn"] or list(SECTIONS)
    unknown = [c for c in chosen if c not in SECTIONS]
    if unknown:
        sys.exit(f"unknown section {', '.join(unknown)} (choose from {', '.join(SECTIONS)})")
    for name, fn in (SECTIONS[c] for c in chosen):
        figures = fn()
        print(f"\n## {name}")
        for key, value in figures.items():
            print(f"  {key:32} {value:.3f}" if isinstance(value, float) else f"  {key:32} {value}")
    sys.stdout.flush()
    os._exit(0)  # inline worker threads are daemonic enough; do not wait on the pool


if __name__ == "__main__":
    main()
