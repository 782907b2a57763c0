"""What a model failover costs a turn (docs/llm.md, "Failover").

    python -m bench.failover [--rounds 10]

Whole runs through ``execute_run`` (inline code path, file provider, a throwaway SQLite
state) with an Anthropic primary and an OpenAI fallback on local wire servers (the official
SDKs over real sockets). Prints the median wall time of a run when

1. the primary answers (baseline);
2. the primary answers 529 and has no retries left (``max_retries: 0``): the cost of
   failing over itself — one more request, and the fallbacks read once per run;
3. the primary refuses connections (``max_retries: 0``);
4. the primary answers 529 with the default retry policy (3 retries from 1 s): what a
   fallback waits for by default before it is asked (one run: it takes seconds).

Nothing is asserted; figures are printed.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STATE = tempfile.mkdtemp(prefix="neta-bench-failover-")
os.environ.update({"NETA_VAR_DIR": STATE, "NETA_TASK_BACKEND": "inline", "NETA_LOG_LEVEL": "ERROR", "BENCH_FAILOVER_API_KEY": "sk-bench",
                   "NETA_TITLE_MODEL": "off"})  # one model call per run: the answer
os.environ.pop("NETA_DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from runtime.models import Agent, ModelConfig  # noqa: E402
from runtime.realtime.sinks import InMemorySink  # noqa: E402
from runtime.runs.prompts import session_prompt  # noqa: E402
from runtime.runs.turn import execute_run  # noqa: E402
from runtime.sessions.services import session_start  # noqa: E402
from tests.support.wire_servers import Reply, Status, WireServer  # noqa: E402

KEY = "BENCH_FAILOVER_API_KEY"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_run(agent: Agent) -> tuple[float, str]:
    session_id = session_start(agent=agent).session_id
    outcome = session_prompt(actor=None, session_id=session_id, text="hello", dispatch=False)
    start = time.perf_counter()
    run = execute_run(outcome.run.run_id, sink=InMemorySink())
    return time.perf_counter() - start, run.status


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    call_command("migrate", verbosity=0)
    workspace = os.path.join(STATE, "workspace")
    os.makedirs(workspace, exist_ok=True)
    answer = Reply(content=[{"type": "text", "text": "An answer of a few words."}])
    with WireServer("anthropic") as primary_server, WireServer("openai") as backup_server:
        fast = {"max_retries": 0, "timeout": 10}
        primary = ModelConfig.objects.create(
            name="primary", provider_kind="anthropic", model_id="claude-bench", base_url=primary_server.base_url, api_key_env=KEY, options=fast
        )
        ModelConfig.objects.create(name="backup", provider_kind="openai", model_id="gpt-bench", base_url=backup_server.base_url, api_key_env=KEY, options=fast)
        agent = Agent.objects.create(name="bench", model=primary, cwd=workspace, fallback_models=["backup"], compaction_enabled=False)

        def measure(label: str, script, rounds: int) -> float:
            times = []
            for _ in range(rounds):
                primary_server.reset()
                backup_server.reset()
                script()
                elapsed, status = one_run(agent)
                if status != "completed":
                    raise SystemExit(f"{label}: the run ended {status}")
                times.append(elapsed)
            median = statistics.median(times)
            print(f"{label:<58} {median * 1000:9.1f} ms  (median of {rounds})")
            return median

        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        measure("warm-up (SDK clients built)", lambda: primary_server.script(answer), 2)
        base = measure("1. primary answers", lambda: primary_server.script(answer), args.rounds)

        def overloaded():
            primary_server.script(Status(529, "Overloaded"))
            backup_server.script(answer)

        over = measure("2. primary 529, no retries → backup answers", overloaded, args.rounds)
        print(f"   failover's own cost: {(over - base) * 1000:+.1f} ms per run ({over / base:.2f}x the baseline)")
        refused_url = f"http://127.0.0.1:{closed_port()}"
        ModelConfig.objects.filter(pk=primary.pk).update(base_url=refused_url)
        measure("3. primary refuses connections, no retries → backup", lambda: backup_server.script(answer), args.rounds)
        ModelConfig.objects.filter(pk=primary.pk).update(base_url=primary_server.base_url, options={"timeout": 10})

        def overloaded_with_retries():
            primary_server.script(*[Status(529, "Overloaded")] * 4)
            backup_server.script(answer)

        measure("4. primary 529 with the default retries (3 from 1 s)", overloaded_with_retries, 1)


if __name__ == "__main__":
    main(sys.argv[1:])
