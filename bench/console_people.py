"""The console's people pages at size: the session list over 10k sessions and 100k runs, the
agent list, the audit log over 10k rows — each page's time (median of 5) and query count.

    python -m bench.console_people [--sessions 10000] [--runs 100000] [--audit 10000]

SQLite under the bench dir (rows only: the session list reads no entry); the target is
under a second a page.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench import environment
from bench.report import Report, machine, ms


def fill(sessions: int, runs: int, audit: int) -> None:
    from django.contrib.auth import get_user_model

    from audit.models import AuditEntry
    from runtime.models import Agent, AgentRun, ModelConfig
    from sessions_tree.models import AgentSession

    if AgentSession.objects.filter(session_id__startswith="bench-console-").count() >= sessions:
        return
    users = get_user_model()
    owner = users.objects.filter(username="bench-owner").first() or users.objects.create_user("bench-owner")
    model, _ = ModelConfig.objects.get_or_create(name="bench-console", defaults=dict(provider_kind="scripted", model_id="s"))
    agents = [Agent.objects.get_or_create(name=f"bench-console-{i}", defaults=dict(model=model, cwd=f"/tmp/bench-console-{i}"))[0] for i in range(20)]
    AgentSession.objects.bulk_create(
        [AgentSession(session_id=f"bench-console-{i:06d}", provider="mysql", user=owner, agent=agents[i % 20].name, title=f"session {i}",
                      entry_count=i % 50, tip_count=1 + i % 3, compaction_count=i % 4) for i in range(sessions)],
        batch_size=2000,
    )  # fmt: skip
    statuses = ["completed", "completed", "failed", "aborted", "completed"]
    AgentRun.objects.bulk_create(
        [AgentRun(session_id=f"bench-console-{i % sessions:06d}", agent=agents[i % 20], user=owner, status=statuses[i % 5],
                  prompt="p", cost=0.001 * (i % 7), output_tokens=i % 500) for i in range(runs)],
        batch_size=5000,
    )  # fmt: skip
    AuditEntry.objects.bulk_create(
        [AuditEntry(actor=owner, actor_name="bench-owner", action=("session.rename", "agent.change", "token.rotate")[i % 3],
                    target_type="sessions_tree.agentsession", target_id=f"bench-console-{i % sessions:06d}",
                    before={"title": "a"}, after={"title": "b"}, via="console") for i in range(audit)],
        batch_size=5000,
    )  # fmt: skip


def timed(client, url: str) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, queries = [], 0
    for _ in range(5):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - t0)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(captured)
    return statistics.median(times), queries


def run(report: Report, *, sessions: int, runs: int, audit: int) -> None:
    environment.setup(migrate=True)
    from django.contrib.auth import get_user_model
    from django.test import Client

    fill(sessions, runs, audit)
    users = get_user_model()
    root = users.objects.filter(username="bench-root").first() or users.objects.create_superuser("bench-root", "r@example.com", "x")
    client = Client()
    client.force_login(root)
    pages = [
        ("session list", "/admin/sessions_tree/agentsession/"),
        ("session list, search", "/admin/sessions_tree/agentsession/?q=session+99"),
        ("session list, by agent", "/admin/sessions_tree/agentsession/?agent=bench-console-3"),
        ("agent list (20 agents)", "/admin/runtime/agent/"),
        ("audit log", "/admin/audit/auditentry/"),
        ("audit log, one action", "/admin/audit/auditentry/?action=token.rotate"),
    ]
    for case, url in pages:
        seconds, queries = timed(client, url)
        report.add("console_people", f"{case}", f"{ms(seconds)} median of 5, {queries} queries", "< 1 s", seconds < 1.0)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.console_people")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--audit", type=int, default=10_000)
    args = parser.parse_args(argv)
    print(f"console_people: {args.sessions} sessions, {args.runs} runs, {args.audit} audit rows; {machine()}")
    report = Report()
    run(report, sessions=args.sessions, runs=args.runs, audit=args.audit)
    print()
    print(report.table())


if __name__ == "__main__":
    main(sys.argv[1:])
