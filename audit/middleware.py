"""Give each request an id (``X-Request-ID``, echoed back) and the door audit rows name."""

from __future__ import annotations

from audit.context import audit_context, clean_request_id
from audit.models import Via


def via_for_path(path: str) -> str | None:
    if path.startswith("/admin/"):
        return Via.CONSOLE
    if path.startswith("/api/"):
        return Via.API
    return None


class AuditContextMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = clean_request_id(request.headers.get("X-Request-ID"))
        request.request_id = request_id
        via = via_for_path(request.path_info)
        if via is None:
            response = self.get_response(request)
        else:
            with audit_context(via=via, request_id=request_id):
                response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
