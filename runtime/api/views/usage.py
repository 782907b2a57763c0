"""Usage and cost for integrations: ``GET /api/usage/`` (docs/api.md)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api.views.base import READ_ERRORS
from runtime.errors import RuntimeInputError
from runtime.runs.usage import parse_query, usage_csv, usage_report
from runtime.sessions.access import reads_all_sessions

PARAMETERS = [
    OpenApiParameter("from", OpenApiTypes.DATE, description="First day (default: 29 days before to)"),
    OpenApiParameter("to", OpenApiTypes.DATE, description="Last day, included (default: today)"),
    OpenApiParameter("group_by", OpenApiTypes.STR, enum=["user", "agent", "model", "day"], description="Default: model"),
    OpenApiParameter("sort", OpenApiTypes.STR, description="key, runs, input_tokens, output_tokens or cost; - first for descending (default: -cost, by day: key)"),
    OpenApiParameter("user", OpenApiTypes.STR, description="Staff who read every session: one user's usage only (a username)"),
    OpenApiParameter("as", OpenApiTypes.STR, enum=["json", "csv"], description="csv: the rows and totals as a CSV download"),
]


class UsageApi(APIView):
    @extend_schema(
        summary="Tokens and cost over a date range, grouped by user, agent, model or day (staff who read every session: everyone's; others: their own)",
        parameters=PARAMETERS,
        responses={200: OpenApiTypes.OBJECT, **READ_ERRORS},
    )
    def get(self, request):
        query = parse_query(request.query_params)
        who = request.user
        if reads_all_sessions(who):
            name = request.query_params.get("user")
            who = None
            if name:
                who = get_user_model().objects.filter(username=name).first()
                if who is None:
                    raise RuntimeInputError("user", f"no user {name!r}")
        elif request.query_params.get("user") not in (None, "", request.user.get_username()):
            raise RuntimeInputError("user", "only staff who read every session see another user's usage")
        report = usage_report(query, user=who)
        shape = request.query_params.get("as") or "json"
        if shape not in ("json", "csv"):
            raise RuntimeInputError("as", "must be json or csv")
        if shape == "csv":
            response = HttpResponse(usage_csv(report), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="usage-{query.group_by}-{query.start}-{query.end}.csv"'
            return response
        return Response(report)
