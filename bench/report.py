"""Figures: percentiles, and the table the benchmarks print."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Row:
    bench: str
    case: str
    figure: str
    target: str = ""
    verdict: str = ""  # "ok", "MISS" or ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(self, bench: str, case: str, figure: str, target: str = "", ok: bool | None = None) -> None:
        verdict = "" if ok is None else ("ok" if ok else "MISS")
        self.rows.append(Row(bench, case, figure, target, verdict))
        print(f"  {bench:<16} {case:<34} {figure:<44} {target:<22} {verdict}", flush=True)

    def table(self) -> str:
        headers = ("bench", "case", "figure", "target", "")
        widths = [max(len(h), *(len(getattr(r, a)) for r in self.rows)) if self.rows else len(h)
                  for h, a in zip(headers, ("bench", "case", "figure", "target", "verdict"))]
        lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths))]
        lines.append("-+-".join("-" * w for w in widths))
        for r in self.rows:
            lines.append(" | ".join(v.ljust(w) for v, w in zip((r.bench, r.case, r.figure, r.target, r.verdict), widths)))
        return "\n".join(lines)


def machine() -> str:
    """The machine and how fast it is now: its load, a fixed Python loop (the interpreter's
    speed) and a round trip between two threads (what waking a thread costs: on a VM it
    moves with the host far more than the loop does, and a server of many threads pays it
    at every hand-off)."""
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; "
            f"1M-step loop {_loop_ms():.0f} ms, thread round trip {_round_trip_us():.0f} µs")  # fmt: skip


def _loop_ms(steps: int = 1_000_000) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        pass
    return (time.perf_counter() - start) * 1000


def _round_trip_us(trips: int = 2000) -> float:
    """Median of 3: ``trips`` messages to a thread and back over two pipes, µs each."""
    import threading

    def once() -> float:
        to_other, from_main = os.pipe()
        to_main, from_other = os.pipe()

        def echo():
            for _ in range(trips):
                os.read(to_other, 1)
                os.write(from_other, b"x")

        thread = threading.Thread(target=echo, daemon=True)
        thread.start()
        start = time.perf_counter()
        for _ in range(trips):
            os.write(from_main, b"x")
            os.read(to_main, 1)
        took = time.perf_counter() - start
        thread.join()
        for fd in (to_other, from_main, to_main, from_other):
            os.close(fd)
        return took / trips * 1e6

    return statistics.median(once() for _ in range(3))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def sized_bench_main(name: str, run: Callable, argv: list[str], *, sizes, repeat: int) -> None:
    """The command line the size-driven benchmarks share: ``--sizes`` and ``--repeat``, then the table."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}")
    parser.add_argument("--sizes", default=",".join(map(str, sizes)))
    parser.add_argument("--repeat", type=int, default=repeat)
    args = parser.parse_args(argv)
    report = Report()
    run(report, sizes=[int(s) for s in args.sizes.split(",")], repeat=args.repeat)
    print()
    print(report.table())
