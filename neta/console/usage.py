"""The console's usage page: tokens and cost over a date range, grouped by user, agent, model
or day, sorted, charted and downloadable (the same report as ``GET /api/usage/``)."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from runtime.errors import RuntimeInputError
from runtime.runs.usage import GROUPS, SORTS, parse_query, usage_csv, usage_report

CHART_ROWS = 20
CHART_WIDTH = 560  # px of the longest bar


@require_safe
def usage_page(request):
    if not request.user.has_perm("runtime.view_agentrun"):
        raise PermissionDenied
    error = None
    try:
        query = parse_query(request.GET)
    except RuntimeInputError as exc:
        error = f"{exc.field}: {exc}"
        query = parse_query({})
    report = usage_report(query)
    if request.GET.get("as") == "csv" and error is None:
        response = HttpResponse(usage_csv(report), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="usage-{query.group_by}-{query.start}-{query.end}.csv"'
        return response
    top = report["rows"][:CHART_ROWS]
    most = max((float(r["cost"]) for r in top), default=0.0)
    bars = [{"key": r["key"], "cost": r["cost"], "width": round(CHART_WIDTH * float(r["cost"]) / most) if most else 0, "y": i * 22} for i, r in enumerate(top)]
    context = {
        **admin.site.each_context(request),
        "title": _("Usage and cost"),
        "report": report,
        "query": query,
        "groups": GROUPS,
        "sorts": [(s, s.replace("_", " ")) for s in SORTS],
        "error": error,
        "bars": bars,
        "chart_height": 22 * len(bars) + 4,
        "chart_width": CHART_WIDTH + 330,  # the labels left of the bars, the cost right of them
        "csv_query": request.GET.urlencode(),
    }
    return TemplateResponse(request, "console/usage.html", context)
