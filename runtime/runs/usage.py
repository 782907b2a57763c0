"""Usage and cost over a date range, grouped by user, agent, model or day: the console's usage
page and ``GET /api/usage/`` (docs/console.md, "Usage and cost").

One aggregate over the runs created in the range (their ``created_at`` index), grouped by the
ids and names the rows hold, folded here into the asked grouping; names come from the few
agents and users it found. The model is the one that answered, as each run recorded it; a
run from before runs recorded it counts under its override, else its agent's model.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from runtime.errors import RuntimeInputError
from runtime.models import Agent, AgentRun

GROUPS = ("user", "agent", "model", "day")
SORTS = ("key", "runs", "input_tokens", "output_tokens", "cost")
FIGURES = ("runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost")
DEFAULT_DAYS = 30
MAX_DAYS = 366


@dataclass(frozen=True)
class UsageQuery:
    start: dt.date
    end: dt.date  # inclusive
    group_by: str
    sort: str  # a SORTS name, "-" first for descending


def _date(value, field: str, default: dt.date) -> dt.date:
    if value in (None, ""):
        return default
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise RuntimeInputError(field, "must be a date: YYYY-MM-DD") from None


def parse_query(params) -> UsageQuery:
    """The query ``params`` ask for (``from``, ``to``, ``group_by``, ``sort``), checked: a
    ``RuntimeInputError`` naming the parameter otherwise. Default: the last 30 days by model."""
    today = timezone.localdate()
    end = _date(params.get("to"), "to", today)
    start = _date(params.get("from"), "from", end - dt.timedelta(days=DEFAULT_DAYS - 1))
    if start > end:
        raise RuntimeInputError("from", "must not be after to")
    if (end - start).days >= MAX_DAYS:
        raise RuntimeInputError("from", f"a range of at most {MAX_DAYS} days")
    group_by = params.get("group_by") or "model"
    if group_by not in GROUPS:
        raise RuntimeInputError("group_by", f"must be one of {', '.join(GROUPS)}")
    sort = params.get("sort") or ("key" if group_by == "day" else "-cost")
    if sort.lstrip("-") not in SORTS:
        raise RuntimeInputError("sort", f"must be one of {', '.join(SORTS)}, with - first for descending")
    return UsageQuery(start=start, end=end, group_by=group_by, sort=sort)


def _bounds(query: UsageQuery) -> tuple[dt.datetime, dt.datetime]:
    zone = timezone.get_current_timezone()
    start = dt.datetime.combine(query.start, dt.time.min, tzinfo=zone)
    return start, dt.datetime.combine(query.end + dt.timedelta(days=1), dt.time.min, tzinfo=zone)


def usage_report(query: UsageQuery, *, user=None) -> dict:
    """Rows (``key`` and the figures), their totals, for the runs created in the range (only
    ``user``'s when given)."""
    start, end = _bounds(query)
    runs = AgentRun.objects.filter(created_at__gte=start, created_at__lt=end)
    if user is not None:
        runs = runs.filter(user=user)
    groups = list(
        runs.annotate(day=TruncDate("created_at"))
        .values("day", "agent_id", "answered_model", "model_name", "user_id")
        .annotate(
            runs=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            cache_read_tokens=Sum("cache_read_tokens"), cache_write_tokens=Sum("cache_write_tokens"), cost=Sum("cost"),
        )  # fmt: skip
        .order_by()
    )
    agents = {a.pk: a for a in Agent.objects.filter(pk__in={g["agent_id"] for g in groups}).select_related("model").only("id", "name", "model__name")}
    users = dict(get_user_model().objects.filter(pk__in={g["user_id"] for g in groups if g["user_id"]}).values_list("id", "username"))
    key = {
        "agent": lambda g: agents[g["agent_id"]].name,
        "model": lambda g: g["answered_model"] or g["model_name"] or agents[g["agent_id"]].model.name,
        "user": lambda g: users.get(g["user_id"], "(no user)"),
        "day": lambda g: g["day"].isoformat(),
    }[query.group_by]
    rows: dict[str, dict] = {}
    totals = {figure: 0 for figure in FIGURES}
    for g in groups:
        row = rows.setdefault(key(g), {"key": key(g), **{figure: 0 for figure in FIGURES}})
        for figure in FIGURES:
            value = g[figure] or 0
            row[figure] += value
            totals[figure] += value
    field = query.sort.lstrip("-")
    ordered = sorted(rows.values(), key=lambda r: (r[field], r["key"]) if field != "key" else r["key"], reverse=query.sort.startswith("-"))
    return {
        "from": query.start.isoformat(),
        "to": query.end.isoformat(),
        "groupBy": query.group_by,
        "sort": query.sort,
        "rows": [_shown(r) for r in ordered],
        "totals": _shown(totals),
    }


def _shown(row: dict) -> dict:
    return {k: (str(Decimal(v).quantize(Decimal("0.000001"))) if k == "cost" else v) for k, v in row.items()}


def usage_csv(report: dict) -> str:
    """The report as CSV: a header, a line per row, then the totals."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([report["groupBy"], *FIGURES])
    for row in report["rows"]:
        writer.writerow([_csv_safe(row["key"]), *(row[f] for f in FIGURES)])
    writer.writerow(["total", *(report["totals"][f] for f in FIGURES)])
    return out.getvalue()


def _csv_safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (a user name may start with =)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
