"""Cold open + context, Neta against Pi on the same file.

For linear and branchy sessions of 1k, 10k and 100k entries: a new process
opens the session and builds its context (``build_context``; the clock starts
after Python, Django and the database connection are up, and stops when the
context is built), for the file provider and the mysql provider (on MariaDB
when ``NETA_TEST_MYSQL_URL`` is set). Pi's time is ``SessionManager.open`` +
``buildSessionContext`` on the same file, in a new node process
(``bench/pi_open.mjs``, Pi's import not counted). Each figure is the median of
``REPEAT`` runs; the page cache is warm for both.

"running" is the same in a process that has already served another session
(a 1k one of the other shape): what a web or worker process pays to open a
session it has not seen, without the first-call costs of a new interpreter.

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


def neta_time(kind: str, using: str, session_id: str, warm_up: str = "-") -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.cold_open", "--child", kind, using, session_id, warm_up],
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


def child(kind: str, using: str, session_id: str, warm_up: str = "-") -> None:
    """In a new process: open the session and build its context, timed
    (after opening ``warm_up``, another session, unless it is "-")."""
    environment.setup()
    import django.db.models.sql.compiler  # noqa: F401 - part of loading Django (the first query imports it)
    from django.db import connections

    from sessions_tree.providers import get_provider

    provider = get_provider(kind, using=using)
    connections[using].ensure_connection()  # connecting is not opening the session
    if warm_up != "-":
        provider.build_context(warm_up)
    t0 = time.perf_counter()
    ctx = provider.build_context(session_id)
    t1 = time.perf_counter()
    print(json.dumps({"totalMs": (t1 - t0) * 1e3, "messages": len(ctx.messages), "maxRssMb": peak_rss_mb()}))


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
                other = stored_session(kind, SHAPES[1 - SHAPES.index(shape)], 1_000, using=using)
                where = "mariadb" if using == "mysql" else "sqlite"
                for process, warm_up in (("new process", "-"), ("running", other)):
                    runs = [neta_time(kind, using, session_id, warm_up) for _ in range(repeat)]
                    total = median([r["totalMs"] for r in runs])
                    figure = f"{total:.1f} ms, rss {median([r['maxRssMb'] for r in runs]):.0f} MB"
                    case = f"neta {kind}/{where} {shape} {n // 1000}k, {process}"
                    if pi is not None:
                        ratio = total / pi
                        report.add("cold_open", case, f"{figure}, {ratio:.2f}x Pi", "<= 0.5x Pi", ratio <= 0.5)
                    else:
                        report.add("cold_open", case, figure, f"(no Pi: {no_pi})")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child(*argv[1:5])
        return
    sized_bench_main("cold_open", run, argv, sizes=SIZES, repeat=REPEAT)


if __name__ == "__main__":
    main(sys.argv[1:])
