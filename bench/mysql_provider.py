"""The mysql provider on MariaDB: context of stored sessions, and its queries.

For linear sessions of 1k, 10k and 100k entries: the context built with no
in-process index (what a new worker process does first), and again with the
index warm, each with the number of queries (``CaptureQueriesContext``): the
count must not grow with the session. Appends are in ``bench.warm_append``.

    python -m bench.mysql_provider [--sizes 1000,10000,100000] [--repeat 5]
"""

from __future__ import annotations

import sys
import time

from bench import environment
from bench.report import Report, machine, median, sized_bench_main

SIZES = (1_000, 10_000, 100_000)
REPEAT = 5


def run(report: Report, *, sizes=SIZES, repeat: int = REPEAT) -> None:
    environment.setup(migrate=True)
    if not environment.has_mysql():
        report.add("mysql_provider", "skipped", "NETA_TEST_MYSQL_URL is not set")
        return
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from bench.stored_sessions import stored_session
    from sessions_tree.providers import get_provider
    from sessions_tree.index import INDEXES

    provider = get_provider("mysql", using="mysql")
    connection = connections["mysql"]
    print(f"mysql provider context ({machine()}; median of {repeat})", flush=True)
    for n in sizes:
        session_id = stored_session("mysql", "linear", n, using="mysql")
        cold, warm = [], []
        for _ in range(repeat):
            INDEXES.clear()
            with CaptureQueriesContext(connection) as cold_q:
                t0 = time.perf_counter()
                ctx = provider.build_context(session_id)
                t1 = time.perf_counter()
            with CaptureQueriesContext(connection) as warm_q:
                t2 = time.perf_counter()
                provider.build_context(session_id)
                t3 = time.perf_counter()
            cold.append(t1 - t0)
            warm.append(t3 - t2)
        assert len(ctx.messages) == n
        target = "<= 50 ms, constant queries" if n == 10_000 else "constant queries"
        ok = median(cold) * 1e3 <= 50 if n == 10_000 else None
        report.add("mysql_provider", f"context {n // 1000}k, no index", f"{median(cold) * 1e3:.1f} ms, {len(cold_q)} queries", target, ok)
        report.add("mysql_provider", f"context {n // 1000}k, warm index", f"{median(warm) * 1e3:.2f} ms, {len(warm_q)} queries")


def main(argv: list[str]) -> None:
    sized_bench_main("mysql_provider", run, argv, sizes=SIZES, repeat=REPEAT)


if __name__ == "__main__":
    main(sys.argv[1:])
