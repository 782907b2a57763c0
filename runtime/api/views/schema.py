"""The OpenAPI schema (``/api/schema/``) and its Swagger page (``/api/docs/``)."""

from __future__ import annotations

import threading
from typing import ClassVar

from django.http import HttpResponse
from django.utils import translation
from django.views import View
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView


class SchemaApi(SpectacularAPIView):
    """The schema is public and the same for every caller, so it is generated and rendered
    once per language, version and format, not on every request: a request cost ~0.1 s of
    CPU (generation and the YAML renderer), which anyone could ask for in a loop."""

    _rendered: ClassVar[dict[tuple, tuple[bytes, str, str]]] = {}
    _lock = threading.Lock()
    KEPT = 16  # languages × formats × versions; what callers may vary (?lang=, ?version=) stays bounded

    def _get_schema_response(self, request):
        version = (
            self.api_version or request.version or self._get_version_parameter(request)
        )
        key = (translation.get_language(), version, request.accepted_media_type)
        with self._lock:
            cached = self._rendered.get(key)
        if cached is None:
            response = super()._get_schema_response(request)
            response.accepted_renderer = request.accepted_renderer
            response.accepted_media_type = request.accepted_media_type
            response.renderer_context = self.get_renderer_context()
            cached = (
                response.rendered_content,
                response["Content-Type"],
                response["Content-Disposition"],
            )
            with self._lock:
                if len(self._rendered) < self.KEPT:
                    self._rendered[key] = cached
        body, content_type, disposition = cached
        return HttpResponse(
            body,
            content_type=content_type,
            headers={"Content-Disposition": disposition},
        )


class DocsPage(SpectacularSwaggerView):
    """The Swagger page. Its renderer is an HTML template, which DRF's OPTIONS
    metadata cannot fill (TemplateDoesNotExist, a 500): OPTIONS answers as
    Django's plain views do, with ``Allow`` and no body."""

    def options(self, request, *args, **kwargs):
        return View.options(self, request, *args, **kwargs)
