"""The console's home: what ran, what it cost, what failed, and whether every part is up."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

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
    checks = [
        ("Database", health["database"]),
        ("Channel layer", health["channelLayer"]),
        ("Celery workers", health["celery"]),
        ("Sandbox", health["sandbox"]),
        ("Reaper", health["reaper"]),
        ("MCP servers", health["mcp"]),
    ]
    return {
        "health": health,
        "health_checks": checks,
        "runs_24h": runs_by_status(since=day_ago),
        "active_runs": active_runs(),
        "failing_runs": failing_runs(since=now - dt.timedelta(days=USAGE_DAYS)),
        "usage": usage_by_day(since=week),
        "usage_days": USAGE_DAYS,
    }
