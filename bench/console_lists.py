"""The console's list pages at 10k sessions and 100k runs (target: each page < 1 s).

    python -m bench.console_lists [--sessions 10000] [--runs 100000] [--repeat 5] [--sqlite]

On MariaDB (the database ``neta_bench_console`` on the server of ``NETA_TEST_MYSQL_URL``;
``--sqlite``: ``var/bench/console.sqlite3``): rows are made once (bulk inserts, kept for the
next run), then each page is loaded ``--repeat`` times as a superuser through Django's test
client (the whole request: middleware, admin, queries, template), the median printed with
its query count. The pages' queries do not grow with the rows (tests/runtime/test_admin_lists.py);
this shows what the database makes of them at size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import time
from urllib.parse import urlparse, urlunparse

from bench import environment

DB_NAME = "neta_bench_console"


def _setup(sqlite: bool) -> str:
    environment.BENCH_DIR.mkdir(parents=True, exist_ok=True)
    os.environ.update(environment._variables())
    url = environment.bench_mysql_url()
    if url and not sqlite:
        parsed = urlparse(url)
        os.environ["NETA_DATABASE_URL"] = urlunparse(parsed._replace(path=f"/{DB_NAME}"))
        import MySQLdb

        conn = MySQLdb.connect(host=parsed.hostname or "127.0.0.1", port=parsed.port or 3306, user=parsed.username or "root", password=parsed.password or "")
        try:
            conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{DB_NAME}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        finally:
            conn.close()
        where = f"MariaDB {DB_NAME}"
    else:
        os.environ["NETA_DATABASE_URL"] = f"sqlite:///{environment.BENCH_DIR / 'console.sqlite3'}"
        where = "SQLite var/bench/console.sqlite3"
    os.environ.pop("NETA_TEST_MYSQL_URL", None)  # one database: the pages read the default one
    os.environ.setdefault("NETA_ALLOWED_HOSTS", "testserver")
    if str(environment.REPO) not in sys.path:
        sys.path.insert(0, str(environment.REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return where


def _fill(n_sessions: int, n_runs: int) -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from runtime.models import Agent, AgentRun, ModelConfig, SubprocessRun
    from sessions_tree.models import AgentSession

    User = get_user_model()
    if not User.objects.filter(username="bench-root").exists():
        User.objects.create_superuser("bench-root", "root@example.com", "pw")
    users = list(User.objects.filter(username__startswith="bench-user-"))
    if len(users) < 50:
        User.objects.bulk_create([User(username=f"bench-user-{i}") for i in range(len(users), 50)])
        users = list(User.objects.filter(username__startswith="bench-user-"))
    model, _ = ModelConfig.objects.get_or_create(name="bench-model", defaults={"provider_kind": "scripted", "model_id": "bench"})
    agents = [Agent.objects.get_or_create(name=f"bench-agent-{i}", defaults={"model": model})[0] for i in range(10)]
    rng = random.Random(7)
    now = timezone.now()
    have = AgentSession.objects.filter(agent__startswith="bench-agent-").count()
    t = time.perf_counter()
    for start in range(have, n_sessions, 2000):
        AgentSession.objects.bulk_create([
            AgentSession(
                session_id=f"bench-session-{i:06d}", provider="mysql" if i % 3 == 0 else "file", agent=agents[i % 10].name,
                user=users[i % 50], title=f"Bench session {i}", header="{}", cwd="/tmp/bench", session_file="",
                entry_count=rng.randint(2, 400), revision=rng.randint(1, 900),
            )
            for i in range(start, min(start + 2000, n_sessions))
        ])
    have_runs = AgentRun.objects.filter(session_id__startswith="bench-session-").count()
    statuses = ["completed"] * 14 + ["failed", "lost", "aborted", "running", "queued"]
    for start in range(have_runs, n_runs, 5000):
        batch = []
        for i in range(start, min(start + 5000, n_runs)):
            status = statuses[i % len(statuses)]
            created = now - dt.timedelta(minutes=i * 7 * 24 * 60 / max(n_runs, 1) * 4)  # spread over four weeks
            batch.append(AgentRun(
                session_id=f"bench-session-{i % n_sessions:06d}", agent=agents[i % 10], user=users[i % 50], status=status,
                prompt="p" * 200, error="model call failed: 529 overloaded\n" + "trace " * 200 if status in ("failed", "lost") else "",
                input_tokens=rng.randint(100, 20000), output_tokens=rng.randint(10, 4000), cost=rng.random() / 10,
                started_at=created, finished_at=created + dt.timedelta(seconds=rng.randint(1, 90)),
            ))
        AgentRun.objects.bulk_create(batch)
    if have_runs < n_runs:  # auto_now_add stamped them all now: spread them as their starts
        from django.db.models import F

        AgentRun.objects.filter(session_id__startswith="bench-session-", started_at__isnull=False).update(created_at=F("started_at"))
    if not SubprocessRun.objects.filter(session_id__startswith="bench-session-").exists():
        parents = list(AgentRun.objects.filter(session_id__startswith="bench-session-").order_by("id").values_list("id", "session_id")[: n_runs // 10])
        for start in range(0, len(parents), 5000):
            SubprocessRun.objects.bulk_create([
                SubprocessRun(
                    session_id=sid, batch_id=f"b{pk}", parent_run_id=pk, tool_call_id="c", task_index=0, mode="single",
                    agent="bench-agent-0", task="t", status="completed",
                )
                for pk, sid in parents[start:start + 5000]
            ])
    took = time.perf_counter() - t
    if took > 1:
        print(f"made the rows in {took:.0f} s")


PAGES = [
    ("overview", "admin:index", ""),
    ("runs", "admin:runtime_agentrun_changelist", ""),
    ("runs ?q=<user>", "admin:runtime_agentrun_changelist", "?q=bench-user-7"),
    ("runs ?q=<agent>", "admin:runtime_agentrun_changelist", "?q=bench-agent-3"),
    ("runs, failed, past 7 days", "admin:runtime_agentrun_changelist", "?status__exact=failed&created_at__gte={week}"),
    ("runs, page 100", "admin:runtime_agentrun_changelist", "?p=100"),
    ("subagent runs", "admin:runtime_subprocessrun_changelist", ""),
    ("sessions", "admin:sessions_tree_agentsession_changelist", ""),
    ("sessions ?q=<title>", "admin:sessions_tree_agentsession_changelist", "?q=Bench+session+4242"),
    ("tools", "admin:console_tools", ""),
    ("models", "admin:runtime_modelconfig_changelist", ""),
    ("agents", "admin:runtime_agent_changelist", ""),
    ("skills", "admin:skills_registry_skillresource_changelist", ""),
    ("tokens", "admin:runtime_apitoken_changelist", ""),
    ("audit log", "admin:audit_auditentry_changelist", ""),
    ("access", "admin:console_access", ""),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sqlite", action="store_true", help="SQLite instead of MariaDB")
    args = parser.parse_args(argv)
    where = _setup(args.sqlite)
    _fill(args.sessions, args.runs)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse
    from django.utils import timezone

    from runtime.models import AgentRun
    from sessions_tree.models import AgentSession

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-root"))
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    week = (midnight - dt.timedelta(days=7)).isoformat().replace("+", "%2B")  # as the admin's date filter links it
    print(f"console list pages on {where}: {AgentSession.objects.count()} sessions, {AgentRun.objects.count()} runs; median of {args.repeat}")
    print(f"{'page':<28} {'median ms':>10} {'max ms':>8} {'queries':>8}")
    worst = 0.0
    for label, name, query in PAGES:
        url = reverse(name) + query.format(week=week)
        client.get(url)  # warm: templates compiled, the agent's projection imported
        times = []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                t = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"{label:<28} {median:>10.0f} {max(times):>8.0f} {len(queries.captured_queries):>8}")
    print(f"slowest page median: {worst:.0f} ms (target < 1000 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
