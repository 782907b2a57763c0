"""Warm appends, and the context right after each one.

A fresh import of a linear session of 1k, 10k and 100k entries per provider
(file: meta on SQLite; mysql: on MariaDB when ``NETA_TEST_MYSQL_URL`` is set)
is opened and its context built once; then ``APPENDS`` entries of ~580 bytes
(user and assistant messages in turn) are appended, each followed by
``build_context``. The file provider calls ``fdatasync`` before an append
returns. Figures: p50/p95 of the append and of the context after it, and the
queries each costs.

    python -m bench.warm_append [--sizes 1000,10000,100000] [--appends 200]
"""

from __future__ import annotations

import argparse
import sys
import time

from bench import environment
from bench.report import Report, machine, percentile

SIZES = (1_000, 10_000, 100_000)
APPENDS = 200


def message(i: int) -> dict:
    text = ("warm append benchmark text " * 20)[:400]
    if i % 2 == 0:
        return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_800_000_000_000 + i}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text[:180]}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "cost": {"total": 0.0001}},
        "stopReason": "stop",
        "timestamp": 1_800_000_000_000 + i,
    }


def run(report: Report, *, sizes=SIZES, appends: int = APPENDS) -> None:
    environment.setup(migrate=True)
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from bench.stored_sessions import delete_session, fresh_session
    from sessions_tree.providers import get_provider

    kinds = [("file", "default")] + ([("mysql", "mysql")] if environment.has_mysql() else [])
    print(f"warm append + context ({machine()}; {appends} appends each)", flush=True)
    for kind, using in kinds:
        where = "mariadb" if using == "mysql" else "sqlite meta"
        for n in sizes:
            session_id = fresh_session(kind, "linear", n, using=using)
            try:
                provider = get_provider(kind, using=using)
                provider.build_context(session_id)
                append_s, context_s = [], []
                for i in range(appends):
                    t0 = time.perf_counter()
                    provider.append_message(session_id, message(i))
                    t1 = time.perf_counter()
                    ctx = provider.build_context(session_id)
                    t2 = time.perf_counter()
                    append_s.append(t1 - t0)
                    context_s.append(t2 - t1)
                assert len(ctx.messages) == n + appends
                with CaptureQueriesContext(connections[using]) as append_q:
                    provider.append_message(session_id, message(appends))
                with CaptureQueriesContext(connections[using]) as context_q:
                    provider.build_context(session_id)
            finally:
                delete_session(kind, session_id, using=using)
            p50, p95 = percentile(append_s, 50) * 1e3, percentile(append_s, 95) * 1e3
            report.add(
                "warm_append",
                f"{kind} ({where}) {n // 1000}k append",
                f"p50 {p50:.2f} ms, p95 {p95:.2f} ms, {len(append_q)} queries",
                "p50 <= 5 ms, flat",
                p50 <= 5,
            )
            c50, c95 = percentile(context_s, 50) * 1e3, percentile(context_s, 95) * 1e3
            report.add(
                "warm_append",
                f"{kind} ({where}) {n // 1000}k context after",
                f"p50 {c50:.2f} ms, p95 {c95:.2f} ms, {len(context_q)} queries",
                "O(new entries)",
            )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.warm_append")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--appends", type=int, default=APPENDS)
    args = parser.parse_args(argv)
    report = Report()
    run(report, sizes=[int(s) for s in args.sizes.split(",")], appends=args.appends)
    print()
    print(report.table())


if __name__ == "__main__":
    main(sys.argv[1:])
