"""``python -m bench [name ...]``: run benchmarks and print one table.

With no name: the session-tree kernel's benchmarks (cold_open, warm_append,
mysql_provider, snapshot). Any other module of ``bench/`` with a ``main()``
(chat_page, gateway_fanout, ...) runs by name, with its own output; ``all`` runs
every one. Each is also ``python -m bench.<name>`` with its own options, which
``python -m bench <name> [options]`` passes on.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from bench.report import Report, machine

KERNEL = ("cold_open", "warm_append", "mysql_provider", "snapshot")
_HELPERS = {"__init__", "__main__", "environment", "load_stack", "report", "session_shapes", "stored_sessions"}


def available() -> list[str]:
    """Every benchmark module in ``bench/`` (the kernel's first)."""
    others = sorted(p.stem for p in Path(__file__).parent.glob("*.py") if p.stem not in _HELPERS and p.stem not in KERNEL)
    return [*KERNEL, *others]


def main(argv: list[str]) -> None:
    names = available()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="name", help=f"all, or any of: {', '.join(names)}")
    args, extra = parser.parse_known_args(argv)
    if extra and len(args.names) != 1:
        parser.error(f"options {' '.join(extra)} need exactly one benchmark name before them")
    chosen = names if args.names == ["all"] else (args.names or list(KERNEL))
    unknown = [n for n in chosen if n not in names]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)} (choose from: all, {', '.join(names)})")
    report = Report()
    started = time.perf_counter()
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        if hasattr(module, "run"):
            module.run(report)
        else:  # a benchmark with its own command line and output
            print(f"\n== python -m bench.{name}", flush=True)
            saved, sys.argv = sys.argv, [f"bench.{name}", *extra]
            try:
                module.main()
            finally:
                sys.argv = saved
    if report.rows:
        print()
        print(f"Neta benchmarks ({machine()}, {time.perf_counter() - started:.0f} s)")
        print(report.table())
    others = [n for n in names if n not in chosen]
    if others:
        print(f"\nNot run: {', '.join(others)} (python -m bench NAME, or python -m bench all)")


if __name__ == "__main__":
    main(sys.argv[1:])
