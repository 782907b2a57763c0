"""``GET /api/health/``: liveness for anyone, the full report for staff."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.runs.health import database_ok, health_report


class HealthApi(APIView):
    """Unauthenticated: ``{"status": "ok"}``, or 503 ``{"status": "down"}`` when the database does
    not answer. Staff (session or token) get every check (docs/api.md, "Health"); 503 only
    when the database is down, a degraded part is reported with 200."""

    permission_classes = [permissions.AllowAny]
    throttle_classes = []  # probes poll it; it does one SELECT 1 for them

    @extend_schema(
        summary="Liveness (anyone); the health of every part (staff)",
        responses={200: OpenApiResponse(description="ok or degraded"), 503: OpenApiResponse(description="the database is down")},
    )
    def get(self, request):
        if request.user.is_authenticated and request.user.is_staff:
            report = health_report()
            return Response(report, status=503 if report["status"] == "down" else 200)
        ok, _detail, _ms = database_ok()
        return Response({"status": "ok" if ok else "down"}, status=200 if ok else 503)
