"""``python -m bench [name ...]``: run the benchmarks (all by default) and print one table.

Names: cold_open, warm_append, mysql_provider, snapshot. Each is also
``python -m bench.<name>`` with its own options.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from bench.report import Report, machine

BENCHMARKS = ("cold_open", "warm_append", "mysql_provider", "snapshot")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[[], *BENCHMARKS], metavar="name", help=f"any of {', '.join(BENCHMARKS)}")
    args = parser.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    report = Report()
    started = time.perf_counter()
    for name in names:
        importlib.import_module(f"bench.{name}").run(report)
    print()
    print(f"Neta benchmarks ({machine()}, {time.perf_counter() - started:.0f} s)")
    print(report.table())


if __name__ == "__main__":
    main(sys.argv[1:])
