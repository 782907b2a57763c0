"""Cold open + context, Neta against Pi on the same file.

For linear and branchy sessions of 1k, 10k and 100k entries: a new process
opens the session and builds its context (the clock starts after Python and
Django are loaded, and stops when the context is built), for the file
provider and the mysql provider (on MariaDB when ``NETA_TEST_MYSQL_URL`` is
set). Pi's time is ``SessionManager.open`` + ``buildSessionContext`` on the
same file, in a new node process (``bench/pi_open.mjs``, Pi's import not
counted). Each figure is the median of ``REPEAT`` runs; the page cache is warm
for both.

    python -m bench.cold_open [--sizes 1000,10000] [--repeat 3]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import environment
from bench.report import Report, machine, median, sized_bench_main

SHAPES = ("linear", "branchy")
SIZES = (1_000, 10_000, 100_000)
REPEAT = 3
PI_OPEN = Path(__file__).with_name("pi_open.mjs")
PI_HOME = Path(os.environ.get("PI_ORACLE_HOME") or Path.home() / ".cache" / "neta-pi-oracle")


def pi_available() -> str | None:
    """Why Pi cannot be timed, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (PI_HOME / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir():
        return f"Pi is not installed in {PI_HOME} (run ../shared/pi-oracle/oracle once)"
    return None


def pi_time(path: Path) -> dict:
    out = subprocess.run(["node", str(PI_OPEN), str(path)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"pi_open.mjs failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def neta_time(kind: str, using: str, session_id: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.cold_open", "--child", kind, using, session_id],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=environment.REPO,
        env=environment.child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"cold open child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``; ``ru_maxrss`` survives exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(kind: str, using: str, session_id: str) -> None:
    """In a new process: open the session and build its context, timed."""
    environment.setup()
    from django.db import connections

    from sessions_tree.providers import get_provider

    provider = get_provider(kind, using=using)
    connections[using].ensure_connection()  # connecting is not opening the session
    t0 = time.perf_counter()
    meta = provider.get_session(session_id)
    provider._store_index(meta)
    t1 = time.perf_counter()
    ctx = provider.build_context(session_id)
    t2 = time.perf_counter()
    rss = peak_rss_mb()
    print(
        json.dumps(
            {"openMs": (t1 - t0) * 1e3, "contextMs": (t2 - t1) * 1e3, "totalMs": (t2 - t0) * 1e3, "messages": len(ctx.messages), "maxRssMb": rss}
        )
    )


def run(report: Report, *, sizes=SIZES, repeat: int = REPEAT) -> None:
    environment.setup(migrate=True)
    from bench.stored_sessions import session_file, stored_session

    kinds = [("file", "default")] + ([("mysql", "mysql")] if environment.has_mysql() else [])
    no_pi = pi_available()
    print(f"cold open + context ({machine()}; median of {repeat})", flush=True)
    for shape in SHAPES:
        for n in sizes:
            path = session_file(shape, n)
            pi = None
            if no_pi is None:
                runs = [pi_time(path) for _ in range(repeat)]
                pi = median([r["totalMs"] for r in runs])
                report.add("cold_open", f"pi {shape} {n // 1000}k", f"{pi:.1f} ms (open {median([r['openMs'] for r in runs]):.0f} + context {median([r['contextMs'] for r in runs]):.0f})")
            for kind, using in kinds:
                session_id = stored_session(kind, shape, n, using=using)
                runs = [neta_time(kind, using, session_id) for _ in range(repeat)]
                total = median([r["totalMs"] for r in runs])
                where = "mariadb" if using == "mysql" else "sqlite"
                figure = f"{total:.1f} ms (open {median([r['openMs'] for r in runs]):.0f} + context {median([r['contextMs'] for r in runs]):.0f}), rss {median([r['maxRssMb'] for r in runs]):.0f} MB"
                if pi is not None:
                    ratio = total / pi
                    report.add("cold_open", f"neta {kind}/{where} {shape} {n // 1000}k", f"{figure}, {ratio:.2f}x Pi", "<= 0.5x Pi", ratio <= 0.5)
                else:
                    report.add("cold_open", f"neta {kind}/{where} {shape} {n // 1000}k", figure, f"(no Pi: {no_pi})")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child(*argv[1:4])
        return
    sized_bench_main("cold_open", run, argv, sizes=SIZES, repeat=REPEAT)


if __name__ == "__main__":
    main(sys.argv[1:])
