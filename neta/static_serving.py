"""``/static/`` for the ASGI server (``NETA_SERVE_STATIC``), with WhiteNoise's responses:
ETag and Last-Modified (304s), gzip copies for clients that take them, ranges, and
``Cache-Control: public, max-age=315360000, immutable`` for content-hashed names (they
never change). Served straight from the event loop: no request thread, no middleware.

Collected (``STATIC_ROOT`` has the manifest): the files under ``STATIC_ROOT``, listed
once at start. Not collected (a fresh clone, a developer editing modules): the source
files the staticfiles finders know, looked up per request and revalidated on each load
(``max-age=0``), so an edit shows on the next reload.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.staticfiles import finders
from whitenoise.base import WhiteNoise

HASHED = re.compile(r"\.[0-9a-f]{12}\.[A-Za-z0-9]+(?:\.gz|\.br)?$")
CHUNK = 64 * 1024


def _immutable(path: str, url: str) -> bool:
    return bool(HASHED.search(url))


def static_files_app(app):
    """``app`` with ``STATIC_URL`` served in front of it."""
    prefix = "/" + settings.STATIC_URL.strip("/") + "/"
    manifest = settings.STATIC_ROOT / "staticfiles.json"
    if manifest.exists():
        files = WhiteNoise(None, root=settings.STATIC_ROOT, prefix=prefix, immutable_file_test=_immutable, max_age=0)
    else:
        files = WhiteNoise(None, autorefresh=True, max_age=0)
        for finder in finders.get_finders():
            for root in _roots(finder):
                files.add_files(root, prefix=prefix)
    return StaticFiles(app, files, prefix)


def _roots(finder):
    for _prefix, root in getattr(finder, "locations", ()):  # FileSystemFinder (STATICFILES_DIRS)
        yield root
    for storage in getattr(finder, "storages", {}).values():  # AppDirectoriesFinder (the admin's, DRF's …)
        yield storage.location


class StaticFiles:
    def __init__(self, app, files: WhiteNoise, prefix: str):
        self.app = app
        self.files = files
        self.prefix = prefix

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            return await self.app(scope, receive, send)
        path = scope["path"]
        found = self.files.find_file(path) if self.files.autorefresh else self.files.files.get(path)
        if found is None:
            return await self.app(scope, receive, send)
        environ = {"HTTP_" + name.decode("latin-1").upper().replace("-", "_"): value.decode("latin-1") for name, value in scope.get("headers", [])}
        response = found.get_response(scope["method"], environ)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        await send({"type": "http.response.start", "status": int(response.status), "headers": headers})
        body = response.file
        if body is None:
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            while chunk := body.read(CHUNK):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            body.close()
