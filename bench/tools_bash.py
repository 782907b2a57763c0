"""Benchmarks for the tool catalog: how fast limits bite and what a call costs.

Run: ``.venv/bin/python -m bench.tools_bash`` (from the repository root). Prints
figures, never asserts. Measured here:

* 100 concurrent ``sleep 100`` with a 1 s timeout: wall time for all to end,
  slowest single call (target: all end within 1.5 s);
* a fork bomb under the process limit: time until the command is stopped;
* a trivial command (``true``) in ``none`` and ``bwrap`` mode: per-call cost,
  and the ratio bwrap / none;
* ``grep`` and ``find`` over a generated tree of 5 000 files.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
django.setup()

from toolcatalog.protocol import ToolContext, get_tool, run_tool  # noqa: E402
from toolcatalog.sandbox import bwrap_status, cgroup_support  # noqa: E402


def bash(ctx: ToolContext, command: str, **extra):
    return run_tool(get_tool("bash"), ctx, {"command": command, **extra})


def hundred_sleeps(root: Path) -> None:
    ctx = ToolContext(roots=(root,), sandbox="none")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=100) as pool:
        results = list(pool.map(lambda _: bash(ctx, "sleep 100", timeout=1), range(100)))
    wall = time.monotonic() - started
    slowest = max(r.details["durationMs"] for r in results) / 1000
    timed_out = sum(1 for r in results if r.details.get("timedOut"))
    print(f"100 x sleep 100, timeout 1 s: all ended after {wall:.2f} s wall; slowest call {slowest:.2f} s; "
          f"{timed_out}/100 timed out")


def fork_bomb(root: Path, mode: str) -> None:
    ctx = ToolContext(roots=(root,), sandbox=mode)
    started = time.monotonic()
    result = bash(ctx, "b(){ b|b& };b; sleep 30", timeout=30)
    print(f"fork bomb ({mode}): stopped after {time.monotonic() - started:.2f} s "
          f"({result.details.get('limitHit') or 'timeout' if result.details.get('timedOut') else result.details})")


def per_call(root: Path, mode: str, n: int = 50) -> float:
    ctx = ToolContext(roots=(root,), sandbox=mode)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        bash(ctx, "true")
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    print(f"bash 'true' ({mode}): median {median * 1000:.1f} ms over {n} calls")
    return median


def search(root: Path) -> None:
    for d in range(50):
        sub = root / f"pkg{d}" / "src"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"m{f}.py").write_text("".join(f"def f{i}(): return {i}\n" for i in range(40)))
    (root / ".gitignore").write_text("pkg4*/\n")
    ctx = ToolContext(roots=(root,), sandbox="none")
    for name, args in (("find", {"pattern": "*.py", "limit": 10000}),
                       ("grep", {"pattern": r"return 3\d$", "limit": 100000})):
        started = time.perf_counter()
        result = run_tool(get_tool(name), ctx, args)
        elapsed = time.perf_counter() - started
        lines = result.text_output().count("\n") + 1
        print(f"{name} over 5000 files (500 ignored): {elapsed * 1000:.0f} ms, {lines} result lines")


def main() -> None:
    support = cgroup_support()
    status = bwrap_status()
    print(f"containment: {support.describe}; bwrap: {status.reason}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hundred_sleeps(root)
        if support.v2_pids or support.v1_pids_base:
            fork_bomb(root, "none")
            if status.available:
                fork_bomb(root, "bwrap")
        else:
            print("fork bomb: skipped (no pids cgroup to cap it)")
        base = per_call(root, "none")
        if status.available:
            boxed = per_call(root, "bwrap")
            print(f"bwrap / none per-call ratio: {boxed / base:.2f}")
        search_root = root / "tree"
        search_root.mkdir()
        search(search_root)


if __name__ == "__main__":
    main()
