"""Memory of a long-running process that reads many sessions, with and without a bound.

Eight copies of the linear 10k-entry session (file provider) are opened one after
the other (``build_context``) by a new process, once with the index cache
unbounded and once with ``NETA_INDEX_CACHE_ENTRIES`` = 30,000 (three sessions'
worth). Printed: the process's resident memory after each open (``VmRSS``), its
peak, the cache's final state, and how long a context takes when its session was
dropped and is read again.

    python -m bench.index_cache [--sessions 8] [--entries 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench import environment
from bench.report import Report, machine

BUDGETS = (("unbounded", 10**9), ("bounded", 30_000))


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(budget: int, session_ids: list[str]) -> None:
    environment.setup()
    from django.conf import settings

    from sessions_tree.index import INDEXES
    from sessions_tree.providers import get_provider

    settings.NETA_INDEX_CACHE_ENTRIES = budget
    provider = get_provider("file")
    provider.build_context(session_ids[0])  # warm up Django before the first figure
    INDEXES.clear()
    base = rss_mb()
    after = []
    for session_id in session_ids:
        provider.build_context(session_id)
        after.append(round(rss_mb() - base, 1))
    t0 = time.perf_counter()
    provider.build_context(session_ids[0])  # dropped when bounded: read again
    again_ms = (time.perf_counter() - t0) * 1e3
    print(json.dumps({"growthMb": after, "peakMb": round(rss_mb("VmHWM"), 1), "baseMb": round(base, 1), "cache": INDEXES.stats(), "firstAgainMs": round(again_ms, 1)}))


def run(report: Report, *, sessions: int = 8, entries: int = 10_000) -> None:
    environment.setup(migrate=True)
    from bench.stored_sessions import delete_session, fresh_session

    print(f"index cache ({machine()}; {sessions} file sessions of {entries} entries)", flush=True)
    ids = [fresh_session("file", "linear", entries) for _ in range(sessions)]
    try:
        for name, budget in BUDGETS:
            out = subprocess.run(
                [sys.executable, "-m", "bench.index_cache", "--child", str(budget), ",".join(ids)],
                capture_output=True, text=True, timeout=600, cwd=environment.REPO, env=environment.child_env(),
            )
            if out.returncode != 0:
                raise RuntimeError(f"index cache child failed: {out.stderr[-2000:]}")
            result = json.loads(out.stdout.strip().splitlines()[-1])
            cache = result["cache"]
            report.add(
                "index_cache",
                f"{name} ({budget if budget < 10**9 else 'no'} limit)",
                f"+{result['growthMb'][-1]:.0f} MB after {sessions} sessions (after each: {', '.join(f'{g:.0f}' for g in result['growthMb'])}), "
                f"{cache['sessions']} cached, {cache['evictions']} dropped, first one again {result['firstAgainMs']:.0f} ms",
            )
    finally:
        for session_id in ids:
            delete_session("file", session_id)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child(int(argv[1]), argv[2].split(","))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.index_cache")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args(argv)
    report = Report()
    run(report, sessions=args.sessions, entries=args.entries)
    print()
    print(report.table())


if __name__ == "__main__":
    main(sys.argv[1:])
