"""Hostile imports and stored-bad sessions over HTTP (the API and the console's read pages).

Every hostile upload gets a 400 naming the field or a readable session with a
report, never a 500 and never a file outside the sessions directory; an id
that is taken (by anyone) is imported under a fresh id, so an import tells
nobody which ids exist; an upload over the limit is stopped while it arrives;
whatever a stored session holds, every read answers 200 or a clean 4xx.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIRequestFactory, force_authenticate

from runtime.api.views.imports import SessionImportApi
from sessions_tree import jsonl
from sessions_tree.clean import needs_cleaning
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider
from tests.support.builders import assert_error
from tests.support.hostile import TS, assistant, bad_content, header_line, hostile_headers, store_behind_back, user

TAG = f"neta-h1-api-{uuid.uuid4().hex[:8]}"
HEADERS = hostile_headers(TAG)


def upload(client, content: bytes, provider: str = "file", name: str = "s.jsonl"):
    return client.post("/api/sessions/import/", {"file": SimpleUploadedFile(name, content), "provider": provider}, format="multipart")


def all_files(root) -> set[str]:
    return {os.path.join(d, n) for d, dirs, files in os.walk(root) for n in [*dirs, *files]}


@pytest.mark.parametrize("provider", ["file", "mysql"])
@pytest.mark.parametrize("case", list(HEADERS))
def test_hostile_headers_answer_400_naming_the_field_and_create_nothing(client_for, agent, sessions_dir, tmp_path, provider, case):
    overrides, field = HEADERS[case]
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": TS, "cwd": "/work/p", **overrides}
    content = (json.dumps(header) + "\n" + user("a1", None, "hi") + "\n").encode()
    sessions_dir.mkdir(parents=True, exist_ok=True)
    before, rows = all_files(tmp_path), AgentSession.objects.count()
    error = assert_error(upload(client_for("owner"), content, provider), 400, "invalid_session_file")
    assert f"file.{field}" in error["fields"], error
    assert AgentSession.objects.count() == rows and all_files(tmp_path) == before
    assert not [name for name in os.listdir("/tmp") if name.startswith(TAG)]


def test_an_id_taken_by_another_user_is_imported_under_a_fresh_id(client_for, agent, outsider):
    from runtime.sessions.services import session_start

    theirs = session_start(agent=agent, user=outsider)
    content = (header_line(id=theirs.session_id) + "\n" + user("a1", None, "mine") + "\n").encode()
    fresh = (header_line() + "\n" + user("a1", None, "mine") + "\n").encode()
    taken_answer = upload(client_for("owner"), content)
    fresh_answer = upload(client_for("owner"), fresh)
    assert taken_answer.status_code == fresh_answer.status_code == 201  # the same answer: no existence oracle
    body = taken_answer.json()
    assert body["import"]["idChanged"] == {"from": theirs.session_id, "to": body["sessionId"]}
    assert body["owner"] == "owner" and body["entryCount"] == 1
    assert "idChanged" not in fresh_answer.json()["import"]
    untouched = AgentSession.objects.get(session_id=theirs.session_id)
    assert untouched.user == outsider and untouched.entry_count == theirs.entry_count
    assert client_for("owner").get(f"/api/sessions/{theirs.session_id}/snapshot/").status_code == 404


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_the_import_answer_reports_skipped_and_repaired_lines(client_for, agent, provider):
    lines = [
        user("u1", None, "fine"),
        "{not json",
        user("u2", "u1", "lone \\ud800"),
        jsonl.dumps(assistant("a1", "u2", "x")).replace('"total":0.001', '"total":1e400'),
        '["an array"]',
    ]
    response = upload(client_for("owner"), (header_line() + "\n" + "\n".join(lines) + "\n").encode(), provider)
    assert response.status_code == 201, response.content
    report = response.json()["import"]
    assert report["source"] == "s.jsonl"  # the upload's name, not a path on the server
    assert [(d["line"], d["kind"]) for d in report["skippedLines"]] == [(3, "malformed"), (6, "not_an_object")]
    assert report["repairedLines"] == [{"line": 4, "kinds": ["lone_surrogate"]}, {"line": 5, "kinds": ["non_finite_number"]}]
    assert report["skippedLineCount"] == 2 and report["repairedLineCount"] == 2
    snapshot = client_for("owner").get(f"/api/sessions/{response.json()['sessionId']}/snapshot/")
    assert snapshot.status_code == 200
    assert [e["id"] for e in snapshot.json()["entries"]] == ["u1", "u2", "a1"]


def test_an_upload_over_the_limit_is_stopped_while_it_arrives(agent, owner, settings):
    settings.NETA_IMPORT_MAX_BYTES = 64 * 1024
    body = (header_line() + "\n" + user("u1", None, "x" * (4 * 1024 * 1024)) + "\n").encode()
    request = APIRequestFactory().post("/api/sessions/import/", {"file": SimpleUploadedFile("big.jsonl", body)}, format="multipart")
    stream = request.META["wsgi.input"]
    force_authenticate(request, user=owner)
    response = SessionImportApi.as_view()(request)
    response.render()
    assert response.status_code == 413, response.content
    assert json.loads(response.content)["error"]["code"] == "too_large"
    read = stream._FakePayload__content.tell() if stream.read_started else 0
    assert read < 1024 * 1024, f"{read} of {len(body)} bytes were read before refusing"
    assert not AgentSession.objects.exists()


def test_an_upload_just_over_the_limit_is_refused_by_counting(client_for, agent, settings):
    settings.NETA_IMPORT_MAX_BYTES = 64 * 1024
    body = (header_line() + "\n" + user("u1", None, "x" * (80 * 1024)) + "\n").encode()  # within the form slack
    assert_error(upload(client_for("owner"), body), 413, "too_large")
    small = (header_line() + "\n" + user("u1", None, "x" * 1000) + "\n").encode()
    assert upload(client_for("owner"), small).status_code == 201


def test_prompt_images_together_must_fit_one_entry(client_for, tree, settings):
    image = {"data": "A" * (7 * 1024 * 1024), "mimeType": "image/png"}
    error = assert_error(
        client_for("owner").post(f"/api/sessions/{tree.session_id}/prompt/", {"text": "look", "images": [image, image]}, format="json"),
        400,
        "invalid",
    )
    assert "images" in error["fields"] and "NETA_MAX_ENTRY_BYTES" in error["message"]


# --------------------------------------------------------------------------- stored-bad sessions over HTTP


def _get_all(client, sid: str, pk: int, entry_ids: list[str]) -> None:
    urls = [
        f"/api/sessions/{sid}/",
        f"/api/sessions/{sid}/snapshot/",
        f"/api/sessions/{sid}/entries/",
        f"/api/sessions/{sid}/events/?sinceRevision=0",
        f"/api/sessions/{sid}/export/",
        "/api/sessions/",
        f"/admin/sessions_tree/agentsession/{pk}/change/",
        f"/admin/sessions_tree/agentsession/{pk}/tree/",
        f"/admin/sessions_tree/agentsession/{pk}/context/",
        *(f"/admin/sessions_tree/agentsession/{pk}/context/?at={i}" for i in entry_ids),
        "/admin/sessions_tree/agentsession/",
        f"/admin/sessions_tree/sessionentry/?session__id__exact={pk}",
    ]
    failures = []
    for url in urls:
        response = client.get(url)
        if response.streaming:  # the export: read it whole, so a failure mid-stream shows
            try:
                b"".join(response.streaming_content)
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(f"{url}: failed while streaming: {exc!r}")
                continue
        if response.status_code >= 500:
            failures.append(f"{url}: {response.status_code} {response.content[:300]!r}")
        elif response["Content-Type"].startswith("application/json"):
            assert not needs_cleaning(jsonl.loads(response.content)), url
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("provider", ["file", "mysql"])
@pytest.mark.parametrize("case", list(bad_content()))
def test_every_read_of_a_stored_bad_session_answers_below_500(client_for, agent, staff, owner, tmp_path, provider, case):
    kernel = get_provider(provider)
    sid = store_behind_back(kernel, tmp_path, bad_content()[case])
    AgentSession.objects.filter(session_id=sid).update(user=owner, agent=agent.name)
    meta = AgentSession.objects.get(session_id=sid)
    ids = [e["id"] for e in kernel.list_entries(sid)]
    for actor in ("owner", "staff"):
        _get_all(client_for(actor), sid, meta.pk, ids)
