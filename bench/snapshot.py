"""Snapshots of 100k-entry sessions: time and size on the wire.

For linear and branchy sessions of 100k entries on each provider: the snapshot
with the session's index warm (a web process that serves the session) and
without (caches cleared), its JSON size, and what its ``page`` says was left out.

    python -m bench.snapshot [--sizes 100000] [--repeat 5]
"""

from __future__ import annotations

import sys
import time

import orjson

from bench import environment
from bench.report import Report, machine, median, sized_bench_main

SIZES = (100_000,)
REPEAT = 5


def run(report: Report, *, sizes=SIZES, repeat: int = REPEAT) -> None:
    environment.setup(migrate=True)
    from django.conf import settings

    from bench.stored_sessions import stored_session
    from sessions_tree.index import INDEXES
    from sessions_tree.providers import get_provider

    kinds = [("file", "default")] + ([("mysql", "mysql")] if environment.has_mysql() else [])
    print(f"snapshot ({machine()}; median of {repeat}; entry limit {settings.NETA_SNAPSHOT_ENTRY_LIMIT})", flush=True)
    for kind, using in kinds:
        provider = get_provider(kind, using=using)
        for shape in ("linear", "branchy"):
            for n in sizes:
                session_id = stored_session(kind, shape, n, using=using)
                cold, warm = [], []
                for _ in range(repeat):
                    INDEXES.clear()
                    t0 = time.perf_counter()
                    provider.get_snapshot(session_id)
                    t1 = time.perf_counter()
                    snapshot = provider.get_snapshot(session_id)
                    t2 = time.perf_counter()
                    cold.append(t1 - t0)
                    warm.append(t2 - t1)
                size = len(orjson.dumps(snapshot))
                page = snapshot["page"]
                report.add(
                    "snapshot",
                    f"{kind} {shape} {n // 1000}k, warm index",
                    f"{median(warm) * 1e3:.1f} ms, {size / 1e6:.2f} MB JSON, {page['includedEntries']} of {page['totalEntries']} entries",
                    "<= 200 ms, bounded",
                    median(warm) * 1e3 <= 200 and page["truncated"],
                )
                report.add("snapshot", f"{kind} {shape} {n // 1000}k, no index", f"{median(cold) * 1e3:.1f} ms")


def main(argv: list[str]) -> None:
    sized_bench_main("snapshot", run, argv, sizes=SIZES, repeat=REPEAT)


if __name__ == "__main__":
    main(sys.argv[1:])
