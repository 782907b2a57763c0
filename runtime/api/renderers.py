"""The API's JSON renderer: renders whatever a session holds.

Stored content is lossless, so it can hold what JSON-over-UTF-8 cannot carry:
lone surrogates (``"\ud800"`` in a Pi file or a provider's reply), non-finite
numbers, nesting deeper than Python's recursion limit. DRF's renderer raises on
each (``UnicodeEncodeError``, ``ValueError``, ``RecursionError``) and the
client got an HTML 500. This renderer takes the fast path first and only on
such an error renders a repaired copy: lone surrogates become U+FFFD,
``NaN``/``Infinity`` become ``null``, and containers nested deeper than
``MAX_RENDER_DEPTH`` are replaced by the string ``"[nested too deep]"``. The
stored data is never changed; the repair is only in what is sent.
"""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer

from runtime.encodable import renderable


class SafeJSONRenderer(JSONRenderer):
    """``REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"]``: DRF's renderer that never raises on stored content."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except (UnicodeEncodeError, ValueError, RecursionError):
            return super().render(renderable(data), accepted_media_type, renderer_context)
