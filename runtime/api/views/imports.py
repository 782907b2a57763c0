"""``POST /api/sessions/import/``: a Pi session file, bounded while it is still uploading."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.utils.translation import gettext as _
from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api import serializers as S
from runtime.api.errors import ApiError
from runtime.api.views.base import ERROR, WRITE_ERRORS, parse
from runtime.sessions.services import (
    session_import,
)
from sessions_tree.errors import InvalidSessionFile
from sessions_tree.models import AgentSession


class _ImportTooLarge(RequestDataTooBig):
    pass


class _ImportLimitHandler(FileUploadHandler):
    """Counts the upload as it arrives and stops reading past ``NETA_IMPORT_MAX_BYTES`` (413)."""

    def __init__(self, request=None, limit: int = 0):
        super().__init__(request)
        self.limit, self.seen = limit, 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + 64 * 1024:  # the form's own bytes aside
            raise _ImportTooLarge(f"the upload is larger than {self.limit} bytes")
        return None

    def receive_data_chunk(self, raw_data, start):
        self.seen += len(raw_data)
        if self.seen > self.limit:
            raise _ImportTooLarge(f"the file is larger than {self.limit} bytes")
        return raw_data

    def file_complete(self, file_size):
        return None


class SessionImportApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body (authentication's CSRF check may): stop
        # reading as soon as the upload is larger than the limit.
        request.upload_handlers.insert(0, _ImportLimitHandler(request, settings.NETA_IMPORT_MAX_BYTES))
        return super().initialize_request(request, *args, **kwargs)

    @extend_schema(
        summary="Import a Pi session file (multipart upload)",
        description=(
            "A header id that is already stored is replaced by a fresh one (`import.idChanged`); "
            "`import` lists the lines skipped or repaired. A header field that is unsafe (id, timestamp, "
            "cwd, parentSession) or an entry the store cannot hold refuses the file (400, `invalid_session_file`)."
        ),
        request={"multipart/form-data": S.ImportInput},
        responses={201: S.ImportOut, **WRITE_ERRORS, 413: ERROR},
    )
    def post(self, request):
        limit = settings.NETA_IMPORT_MAX_BYTES
        try:
            data = parse(S.ImportInput, request.data)
        except _ImportTooLarge as exc:
            raise ApiError("too_large", str(exc), status_code=413, field="file") from None
        upload = data["file"]
        if upload.size > limit:
            raise ApiError("too_large", _("the file is larger than %(limit)s bytes") % {"limit": limit}, status_code=413, field="file")
        name = upload.name or "file"
        with _upload_on_disk(upload) as path:
            try:
                meta = session_import(
                    path=path,
                    actor=request.user,
                    agent_name=data.get("agent"),
                    provider_kind=data.get("provider"),
                    source_name=name,
                )
            except InvalidSessionFile as exc:
                # The message names our temporary file; the client knows its upload as "file".
                field = f"file.{exc.field}" if exc.field else "file"
                raise ApiError(exc.code, str(exc).replace(str(path), name), field=field) from exc
        meta = AgentSession.objects.select_related("user").get(pk=meta.pk)
        return Response(S.ImportOut(meta).data, status=status.HTTP_201_CREATED)


@contextlib.contextmanager
def _upload_on_disk(upload):
    temp_path = getattr(upload, "temporary_file_path", None)
    if temp_path is not None:
        yield Path(temp_path())
        return
    fd, name = tempfile.mkstemp(suffix=".jsonl", prefix="neta-import-")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in upload.chunks():
                fh.write(chunk)
        yield Path(name)
    finally:
        os.unlink(name)
