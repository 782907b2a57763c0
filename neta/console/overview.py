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
    usage_by_day,
)

USAGE_DAYS = 7


def overview_context() -> dict:
    now = timezone.now()
    day_ago = now - dt.timedelta(hours=24)
    week = (now - dt.timedelta(days=USAGE_DAYS - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
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
    usage = usage_by_day(since=week)
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
        "usage_tables": [(by, by_labels.get(by, by), rows) for by, rows in usage.items()],
        "runs_24h": runs_24h,
        "runs_24h_labels": [(status, run_labels.get(status, status), n) for status, n in runs_24h.items()],
        "active_runs": active_runs(),
        "failing_runs": failing_runs(since=now - dt.timedelta(days=USAGE_DAYS)),
        "usage": usage,
        "usage_days": USAGE_DAYS,
    }
