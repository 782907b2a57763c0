"""Sessions over the REST API: create, list, rename, archive, delete, snapshot,
entries and events pages, export and import — and the one error shape."""

from __future__ import annotations

import json

from sessions_tree.models import AgentSession
from sessions_tree.providers import SessionTreeProvider, get_provider
from tests.support.builders import assert_error
from tests.support.services import FIXTURES


def test_create_session_uses_the_agent_and_names_it_with_a_session_info_entry(client_for, agent, owner):
    client = client_for("owner")
    response = client.post("/api/sessions/", {"title": "  My work  "})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["agent"] == "default" and body["provider"] == agent.session_provider
    assert body["title"] == "My work" and body["owner"] == "owner"
    entries = client.get(f"/api/sessions/{body['sessionId']}/entries/").json()["results"]
    assert [e["type"] for e in entries] == ["model_change", "thinking_level_change", "session_info"]
    assert entries[-1]["name"] == "My work"


def test_create_with_an_unknown_agent_names_the_field_and_writes_nothing(client_for, agent):
    before = AgentSession.objects.count()
    assert_error(client_for("owner").post("/api/sessions/", {"agent": "nobody"}), 400, "invalid", "agent")
    assert_error(client_for("owner").post("/api/sessions/", {"title": "x" * 501}), 400, "invalid", "title")
    assert AgentSession.objects.count() == before


def test_users_list_their_own_sessions_and_staff_list_and_filter_all(client_for, tree, outsider, agent):
    from runtime.sessions.services import session_start

    other = session_start(agent=agent, user=outsider)
    mine = [s["sessionId"] for s in client_for("owner").get("/api/sessions/").json()["results"]]
    assert mine == [tree.session_id]
    theirs = [s["sessionId"] for s in client_for("outsider").get("/api/sessions/").json()["results"]]
    assert theirs == [other.session_id]
    everything = {s["sessionId"] for s in client_for("staff").get("/api/sessions/").json()["results"]}
    assert everything == {tree.session_id, other.session_id}
    filtered = client_for("staff").get("/api/sessions/", {"user": "outsider"}).json()["results"]
    assert [s["sessionId"] for s in filtered] == [other.session_id]


def test_session_lists_are_bounded_and_cursor_paginated(client_for, agent, owner):
    from runtime.sessions.services import session_start

    made = {session_start(agent=agent, user=owner).session_id for _ in range(5)}
    client = client_for("owner")
    seen, url, pages = [], "/api/sessions/?limit=2", 0
    while url:
        page = client.get(url).json()
        assert len(page["results"]) <= 2
        seen += [s["sessionId"] for s in page["results"]]
        url, pages = page["next"], pages + 1
    assert sorted(seen) == sorted(made) and pages == 3
    assert_error(client.get("/api/sessions/?cursor=garbage"), 400, "invalid_cursor", "cursor")


def test_another_users_session_is_not_found_everywhere(client_for, tree):
    client = client_for("outsider")
    for path in ("", "snapshot/", "entries/", "events/?sinceRevision=0", "export/"):
        assert_error(client.get(f"/api/sessions/{tree.session_id}/{path}"), 404, "session_not_found")


def test_rename_and_archive(client_for, tree, published, django_capture_on_commit_callbacks):
    client = client_for("owner")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.patch(f"/api/sessions/{tree.session_id}/", {"title": "Renamed", "status": "archived"})
    assert response.status_code == 200, response.content
    assert response.json()["title"] == "Renamed" and response.json()["status"] == "archived"
    # The title travels as a session_info entry (Pi's name), the status as session_updated.
    assert [e["type"] for _, e in published] == ["session_entry_added", "session_updated"]
    assert published[0][1]["entry"]["type"] == "session_info"
    assert published[1][1]["session"] == {"status": "archived"}
    assert_error(client.patch(f"/api/sessions/{tree.session_id}/", {}), 400, "invalid")
    assert_error(client.patch(f"/api/sessions/{tree.session_id}/", {"status": "gone"}), 400, "invalid", "status")
    assert_error(client.put(f"/api/sessions/{tree.session_id}/", {"title": "x"}), 405, "method_not_allowed")


def test_delete_removes_the_session_and_its_file(client_for, tree):
    meta = AgentSession.objects.get(session_id=tree.session_id)
    from pathlib import Path

    path = Path(meta.session_file)
    assert path.exists()
    assert client_for("owner").delete(f"/api/sessions/{tree.session_id}/").status_code == 204
    assert not path.exists() and not AgentSession.objects.filter(session_id=tree.session_id).exists()
    assert_error(client_for("owner").get(f"/api/sessions/{tree.session_id}/"), 404, "session_not_found")


def test_snapshot_is_the_kernel_snapshot_with_the_runtime_context(client_for, tree, agent):
    body = client_for("owner").get(f"/api/sessions/{tree.session_id}/snapshot/").json()
    kernel = get_provider("file").get_snapshot(tree.session_id)
    assert {k: v for k, v in body.items() if k != "runtimeContext"} == {k: v for k, v in kernel.items() if k != "runtimeContext"}
    assert body["runtimeContext"] == {
        **kernel["runtimeContext"],
        "contextWindow": agent.model.context_window,
        "runState": {"state": "idle", "runId": None},
    }
    assert body["leafId"] == tree.ids["a3"]


def test_entries_pages_walk_the_stored_order(client_for, tree):
    client = client_for("owner")
    stored = get_provider("file").list_entries(tree.session_id)
    seen, url = [], f"/api/sessions/{tree.session_id}/entries/?limit=3"
    first_seqs = []
    while url:
        page = client.get(url).json()
        first_seqs.append(page["firstSeq"])
        seen += page["results"]
        url = page["next"]
    assert seen == stored and first_seqs == [1, 4, 7]
    assert_error(client.get(f"/api/sessions/{tree.session_id}/entries/?limit=0"), 400, "invalid", "limit")
    assert_error(client.get(f"/api/sessions/{tree.session_id}/entries/?cursor=-1"), 400, "invalid", "cursor")


def test_events_fill_gaps_and_say_when_the_log_is_too_short(client_for, tree, settings):
    client = client_for("owner")
    provider = get_provider("file")
    revision = provider.get_session(tree.session_id).revision
    seen, url = [], f"/api/sessions/{tree.session_id}/events/?sinceRevision=0&limit=4"
    while url:
        page = client.get(url).json()
        seen += page["results"]
        url = page["next"]
    assert [e["revision"] for e in seen] == list(range(1, revision + 1))
    assert seen == provider.events_since(tree.session_id, 0)
    assert client.get(f"/api/sessions/{tree.session_id}/events/?sinceRevision={revision}").json()["results"] == []
    assert_error(client.get(f"/api/sessions/{tree.session_id}/events/"), 400, "invalid", "sinceRevision")
    assert_error(client.get(f"/api/sessions/{tree.session_id}/events/?sinceRevision={revision + 5}"), 410, "resync_needed")
    # The log is pruned when it grows past NETA_EVENT_LOG_SIZE: old revisions are gone.
    from sessions_tree.models import SessionEvent

    SessionEvent.objects.filter(session__session_id=tree.session_id, revision__lte=3).delete()
    assert_error(client.get(f"/api/sessions/{tree.session_id}/events/?sinceRevision=1"), 410, "resync_needed")


def test_export_is_the_pi_file_and_import_reads_it_back(client_for, tree, tmp_path):
    client = client_for("owner")
    response = client.get(f"/api/sessions/{tree.session_id}/export/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    exported = b"".join(response.streaming_content)
    assert exported == "".join(get_provider("file").export_lines(tree.session_id)).encode()
    # Streamed from the file, the same bytes as the lines the index holds.
    assert exported == "".join(SessionTreeProvider.export_lines(get_provider("file"), tree.session_id)).encode()
    # The same file again: the session id is taken, so the copy gets a fresh one
    # (an import never tells whether an id exists) and keeps every entry line.
    path = tmp_path / "again.jsonl"
    path.write_bytes(exported)
    with path.open("rb") as fh:
        again = client.post("/api/sessions/import/", {"file": fh}, format="multipart")
    assert again.status_code == 201, again.content
    body = again.json()
    assert body["import"]["idChanged"] == {"from": tree.session_id, "to": body["sessionId"]}
    assert body["sessionId"] != tree.session_id
    copy = b"".join(client.get(f"/api/sessions/{body['sessionId']}/export/").streaming_content).split(b"\n")
    assert copy[1:] == exported.split(b"\n")[1:]
    assert json.loads(copy[0])["id"] == body["sessionId"]


def test_import_a_pi_file_keeps_every_line(client_for, agent):
    source = FIXTURES / "02-branches.jsonl"
    with source.open("rb") as fh:
        response = client_for("outsider").post("/api/sessions/import/", {"file": fh, "provider": "mysql"}, format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["owner"] == "outsider" and body["provider"] == "mysql" and body["agent"] == "default"
    exported = b"".join(client_for("outsider").get(f"/api/sessions/{body['sessionId']}/export/").streaming_content)
    assert exported.decode().splitlines() == [line for line in source.read_text().splitlines() if line.strip()]


def test_a_file_that_is_not_a_pi_session_is_refused_whole(client_for, agent, tmp_path, sessions_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "a header"}\n{"type": "message", "id": "aaaaaaaa"}\n')
    before = AgentSession.objects.count()
    with bad.open("rb") as fh:
        error = assert_error(
            client_for("owner").post("/api/sessions/import/", {"file": fh}, format="multipart"), 400, "invalid_session_file", "file"
        )
    assert "bad.jsonl" in error["message"]
    assert AgentSession.objects.count() == before
    assert not sessions_dir.exists() or not any(sessions_dir.rglob("*.jsonl"))
    assert_error(client_for("owner").post("/api/sessions/import/", {}, format="multipart"), 400, "invalid", "file")


def test_labels_name_the_field_and_write_nothing_on_error(client_for, tree):
    client = client_for("owner")
    provider = get_provider("file")
    revision = provider.get_session(tree.session_id).revision
    url = f"/api/sessions/{tree.session_id}/labels/"
    assert_error(client.post(url, {"entryId": "nope1234", "label": "x"}), 400, "entry_not_found", "entryId")
    assert_error(client.post(url, {"entryId": tree.ids["u1"], "label": "x" * 201}), 400, "invalid", "label")
    assert_error(client.post(url, {"label": "x"}), 400, "invalid", "entryId")
    assert provider.get_session(tree.session_id).revision == revision
    response = client.post(url, {"entryId": tree.ids["u1"], "label": "start"})
    assert response.status_code == 201 and response.json()["revision"] == revision + 1
    assert client.get(f"/api/sessions/{tree.session_id}/snapshot/").json()["labelsByEntryId"] == {tree.ids["u1"]: "start"}


def test_fork_copies_the_path_into_a_session_of_the_caller(client_for, tree):
    response = client_for("staff").post(f"/api/sessions/{tree.session_id}/fork/", {"entryId": tree.ids["u2"]})
    assert response.status_code == 201, response.content
    fork = response.json()
    assert fork["owner"] == "staff" and fork["parentSessionId"] == tree.session_id
    snapshot = client_for("staff").get(f"/api/sessions/{fork['sessionId']}/snapshot/").json()
    source_path = get_provider("file").get_active_path(tree.session_id, tree.ids["u2"])
    assert snapshot["activePath"] == [e["id"] for e in source_path]
    assert_error(client_for("owner").post(f"/api/sessions/{tree.session_id}/fork/", {"entryId": "zzzzzzzz"}), 400, "entry_not_found", "entryId")


def test_a_busy_session_answers_409(client_for, tree):
    from tests.support.entries import assistant_message

    provider = get_provider("file")
    provider.begin_in_flight(tree.session_id, assistant_message(""))
    error = assert_error(
        client_for("owner").post(f"/api/sessions/{tree.session_id}/labels/", {"entryId": tree.ids["u1"], "label": "x"}), 409, "session_busy"
    )
    assert "in flight" in error["message"]


def test_bad_prompts_name_the_field_and_start_nothing(client_for, tree):
    from runtime.models import AgentRun

    client = client_for("owner")
    url = f"/api/sessions/{tree.session_id}/prompt/"
    assert_error(client.post(url, {"text": "   "}), 400, "invalid", "text")
    assert_error(client.post(url, {}), 400, "invalid", "text")
    assert_error(client.post(url, {"text": "hi", "mode": "shout"}), 400, "invalid", "mode")
    assert_error(client.post(url, {"text": "hi", "images": [{"data": "AAAA", "mimeType": "text/html"}]}), 400, "invalid", "images[0].mimeType")
    assert_error(client.post(url, {"text": "hi", "model": "no-such-model"}), 400, "invalid", "model")
    assert_error(client.post(url, {"text": "hi", "fromEntryId": "nope0000"}), 400, "entry_not_found", "fromEntryId")
    assert_error(client.post(url, "{not json", content_type="application/json"), 400, "parse_error")
    assert_error(client.post(url, "text=hi", content_type="text/plain"), 415, "unsupported_media_type")
    assert not AgentRun.objects.exists()
    assert get_provider("file").get_session(tree.session_id).leaf_entry_id == tree.ids["a3"]


def test_unknown_paths_and_methods_use_the_error_shape(client_for, agent):
    assert_error(client_for("owner").get("/api/nothing/here/"), 404, "not_found")
    assert_error(client_for("anonymous").get("/api/nothing/"), 404, "not_found")
    assert_error(client_for("owner").delete("/api/agents/default/"), 405, "method_not_allowed")
    assert_error(client_for("owner").get("/api/agents/nobody/"), 404, "not_found")
    assert_error(client_for("owner").get("/api/runs/not-a-uuid/"), 404, "not_found")


def test_hot_endpoints_do_not_grow_queries_with_the_data(client_for, agent, owner, django_assert_max_num_queries):
    from runtime.models import AgentRun
    from runtime.sessions.services import session_start

    client = client_for("owner")
    for _ in range(12):
        meta = session_start(agent=agent, user=owner)
        AgentRun.objects.create(session_id=meta.session_id, agent=agent, user=owner, prompt="p", status="completed")
    # Login session, user, one page query: nothing per row.
    with django_assert_max_num_queries(3):
        assert len(client.get("/api/sessions/").json()["results"]) == 12
    with django_assert_max_num_queries(3):
        assert len(client.get("/api/runs/").json()["results"]) == 12
    with django_assert_max_num_queries(8):
        assert client.get(f"/api/sessions/{meta.session_id}/snapshot/").status_code == 200


def test_a_prompt_reads_the_session_row_once_before_it_locks_it(client_for, agent, owner, settings):
    """The API's access check reads the row; the prompt takes that copy (``meta=``) and
    only reads it again under its lock: two reads of the row, not three."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runtime.sessions.services import session_start

    settings.NETA_TASK_BACKEND = "celery"  # the run stays queued: only the request's queries count
    meta = session_start(agent=agent, user=owner)
    with CaptureQueriesContext(connection) as captured:
        response = client_for("owner").post(f"/api/sessions/{meta.session_id}/prompt/", {"text": "hi"}, format="json")
    assert response.status_code == 202, response.content
    session_reads = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT") and 'FROM "sessions_tree_agentsession"' in q["sql"]]
    assert len(session_reads) == 2, session_reads
