"""The console's home: what ran, what it cost, what failed, and whether every part is up."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from runtime.runs.health import health_report
from runtime.runs.selectors import (
    active_runs,
    failing_runs,
    runs_by_status,
)
from runtime.runs.usage import parse_query, usage_report

USAGE_DAYS = 7
USAGE_TOP = 5  # rows per grouping on the overview


def overview_context() -> dict:
    now = timezone.now()
    day_ago = now - dt.timedelta(hours=24)
    health = health_report()
    parts = [
        ("Database", _("Database"), health["database"]),
        ("Channel layer", _("Channel layer"), health["channelLayer"]),
        ("Celery workers", _("Celery workers"), health["celery"]),
        ("Sandbox", _("Sandbox"), health["sandbox"]),
        ("Reaper", _("Reaper"), health["reaper"]),
        ("MCP servers", _("MCP servers"), health["mcp"]),
    ]
    # The key (English) names the row for the page's hooks; the label is the reader's.
    checks = [(label, {**check, "key": key}) for key, label, check in parts]
    status_labels = {"ok": pgettext("health", "ok"), "degraded": pgettext("health", "degraded"), "down": pgettext("health", "down")}
    today = timezone.localdate()
    week_query = {"from": (today - dt.timedelta(days=USAGE_DAYS - 1)).isoformat(), "to": today.isoformat()}
    # Totals and the top few per grouping: one aggregate each over the week's runs (their
    # created_at index), whatever the number of runs before; every row is on the usage page.
    reports = {by: usage_report(parse_query({**week_query, "group_by": by})) for by in ("agent", "model", "user")}
    runs_24h = runs_by_status(since=day_ago)
    run_labels = {
        "queued": pgettext("run", "queued"), "running": pgettext("run", "running"), "waiting": pgettext("run", "waiting"),
        "completed": pgettext("run", "completed"), "aborted": pgettext("run", "aborted"), "failed": pgettext("run", "failed"),
        "lost": pgettext("run", "lost"),
    }  # fmt: skip
    by_labels = {"agent": _("agent"), "model": _("model"), "user": _("user")}
    return {
        "health": {**health, "status_label": status_labels.get(health["status"], health["status"])},
        "health_checks": checks,
        "usage_tables": [(by, by_labels.get(by, by), report["rows"][:USAGE_TOP]) for by, report in reports.items()],
        "usage_totals": reports["agent"]["totals"],
        "usage_query": week_query,
        "runs_24h": runs_24h,
        "runs_24h_labels": [(status, run_labels.get(status, status), n) for status, n in runs_24h.items()],
        "active_runs": active_runs(),
        "failing_runs": failing_runs(since=now - dt.timedelta(days=USAGE_DAYS)),
        "usage_days": USAGE_DAYS,
    }
