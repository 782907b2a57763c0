"""Give each request an id (``X-Request-ID``, echoed back) and the door audit rows name."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from audit.context import audit_context, clean_request_id
from audit.models import Via


def via_for_path(path: str) -> str | None:
    if path.startswith("/admin/"):
        return Via.CONSOLE
    if path.startswith("/api/"):
        return Via.API
    return None


class AuditContextMiddleware:
    """Sync and async: under ASGI it runs on the event loop, so a request crosses into a
    thread once, for its view (a sync-only middleware here cost two more crossings a
    request). The context variables it sets reach the view's thread (asgiref copies them)."""

    sync_capable = async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        request_id, via = self._start(request)
        if via is None:
            response = self.get_response(request)
        else:
            with audit_context(via=via, request_id=request_id):
                response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response

    async def _acall(self, request):
        request_id, via = self._start(request)
        if via is None:
            response = await self.get_response(request)
        else:
            with audit_context(via=via, request_id=request_id):
                response = await self.get_response(request)
        response["X-Request-ID"] = request_id
        return response

    @staticmethod
    def _start(request) -> tuple[str, str | None]:
        request_id = clean_request_id(request.headers.get("X-Request-ID"))
        request.request_id = request_id
        return request_id, via_for_path(request.path_info)
