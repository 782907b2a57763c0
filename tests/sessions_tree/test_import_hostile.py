"""Hostile input at the session store's door, on every provider (file, mysql on
SQLite, mysql on MariaDB): path tricks and unsafe header fields are refused with
the field named and nothing created; bad content is repaired with a report or
kept readable; whatever a stored session holds, no read raises anything but a
clean ``SessionTreeError``; MariaDB's limits are checked before the database
meets them.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from sessions_tree import jsonl
from sessions_tree.clean import clean_text, needs_cleaning
from sessions_tree.errors import (
    InvalidEntry,
    InvalidSessionFile,
    SessionNotFound,
    SessionTreeError,
)
from sessions_tree.models import AgentSession
from sessions_tree.pi_files import import_session_file
from sessions_tree.pi_view import session_view
from tests.support.entries import assistant_message, forget_process_caches, user_message
from tests.support.hostile import (
    TS,
    assistant,
    bad_content,
    deep,
    header_line,
    hostile_file,
    hostile_headers,
    store_behind_back,
    user,
)

pytestmark = pytest.mark.django_db(databases="__all__")

TAG = f"neta-h1-{uuid.uuid4().hex[:8]}"
HEADERS = hostile_headers(TAG)


def files_under(root: Path) -> set[Path]:
    return {Path(dirpath) / name for dirpath, dirnames, filenames in os.walk(root) for name in [*filenames, *dirnames]}


def escape_targets(sessions_dir: Path, overrides: dict) -> list[Path]:
    """Where the old code would have written for these header fields."""
    ts = str(overrides.get("timestamp", TS)).replace(":", "-").replace(".", "-")
    sid = str(overrides.get("id", "x"))
    raw = f"{sessions_dir}/--work-p--/{ts}_{sid}.jsonl".replace("\0", "")
    return [Path(os.path.normpath(raw)), Path(os.path.normpath(raw.replace("\\", "/")))]


@pytest.mark.parametrize("case", list(HEADERS))
def test_unsafe_header_fields_are_refused_and_nothing_is_created(provider, sessions_dir, tmp_path, case):
    overrides, field = HEADERS[case]
    source = hostile_file(tmp_path / "in.jsonl", overrides)
    sessions_dir.mkdir(parents=True, exist_ok=True)
    before_tree, before_rows = files_under(tmp_path), AgentSession.objects.using(provider.using).count()
    targets = [t for t in escape_targets(sessions_dir, overrides) if not t.exists()]
    with pytest.raises(InvalidSessionFile) as refused:
        import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert refused.value.field == field, refused.value
    assert field in str(refused.value)
    assert AgentSession.objects.using(provider.using).count() == before_rows
    assert files_under(tmp_path) == before_tree  # no file, no folder, inside or around the sessions folder
    for target in targets:
        assert not target.exists(), f"written outside the sessions directory: {target}"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"session_id": "../../x"}, "header.id"),
        ({"session_id": "a" * 65}, "header.id"),
        ({"session_id": "x\0"}, "header.id"),
        ({"timestamp": "../../../x"}, "header.timestamp"),
        ({"cwd": "/a\0b"}, "header.cwd"),
        ({"parent_session": "p" * 5000}, "header.parentSession"),
    ],
)
def test_create_session_refuses_unsafe_fields_too(provider, sessions_dir, tmp_path, kwargs, field):
    before = files_under(tmp_path)
    with pytest.raises(InvalidSessionFile) as refused:
        provider.create_session(**kwargs)
    assert refused.value.field == field
    assert files_under(tmp_path) == before and not AgentSession.objects.using(provider.using).exists()


def test_a_symlinked_cwd_folder_cannot_lead_outside(sessions_dir, tmp_path):
    from sessions_tree.providers import get_provider

    outside = tmp_path / "outside"
    outside.mkdir()
    sessions_dir.mkdir()
    (sessions_dir / "--evil--").symlink_to(outside)
    with pytest.raises(InvalidSessionFile):
        get_provider("file").create_session(cwd="/evil")
    assert list(outside.iterdir()) == [] and not AgentSession.objects.exists()


def test_a_cwd_too_long_for_a_folder_name_gets_a_bounded_one(sessions_dir):
    from sessions_tree.providers import get_provider

    cwd = "/" + "/".join(["d" * 200] * 5)
    meta = get_provider("file").create_session(cwd=cwd)
    path = Path(meta.session_file)
    assert path.parent.parent == sessions_dir and len(path.parent.name.encode()) <= 255 and path.exists()
    assert meta.cwd == cwd


def test_a_taken_header_id_gets_a_fresh_one_and_the_entries_keep_their_bytes(provider, tmp_path):
    source = tmp_path / "s.jsonl"
    sid = str(uuid.uuid4())
    lines = [user("u1", None, "hi"), jsonl.dumps(assistant("a1", "u1", "yo"))]
    source.write_text(header_line(id=sid) + "\n" + "\n".join(lines) + "\n")
    first = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    second = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert first.session_id == sid and second.session_id != sid
    assert second.diagnostics["import"]["idChanged"] == {"from": sid, "to": second.session_id}
    exported = "".join(provider.export_lines(second.session_id)).split("\n")
    assert json.loads(exported[0])["id"] == second.session_id
    assert exported[1:-1] == lines
    assert [e["id"] for e in provider.list_entries(first.session_id)] == ["u1", "a1"]


def test_lone_surrogates_and_overflowing_numbers_are_repaired_and_reported(provider, tmp_path):
    source = tmp_path / "bad.jsonl"
    lines = [
        user("u1", None, "fine"),
        user("u2", "u1", "bad \\ud800 here, a pair \\ud83d\\ude00 kept"),
        jsonl.dumps(assistant("a1", "u2", "x")).replace('"total":0.001', '"total":1e400'),
        jsonl.dumps(assistant("a2", "a1", "x")).replace('"total":0.001', '"total":NaN'),
        '{"type":"custom","customType":"k","data":{"\\udc00":1},"id":"c1","parentId":"a1","timestamp":"%s"}' % TS,
    ]
    source.write_text(header_line() + "\n" + "\n".join(lines) + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    report = meta.diagnostics["import"]
    assert report["repairedLines"] == [
        {"line": 3, "kinds": ["lone_surrogate"]},
        {"line": 4, "kinds": ["non_finite_number"]},
        {"line": 6, "kinds": ["lone_surrogate"]},
    ]
    assert report["repairedLineCount"] == 3
    assert [d["line"] for d in report["skippedLines"]] == [5] and report["skippedLineCount"] == 1  # NaN: Pi skips it too
    forget_process_caches()
    entries = provider.list_entries(meta.session_id)
    assert [e["id"] for e in entries] == ["u1", "u2", "a1", "c1"]
    assert entries[1]["message"]["content"][0]["text"] == "bad \ufffd here, a pair \U0001f600 kept"
    assert entries[2]["message"]["usage"]["cost"]["total"] is None  # JSON.stringify(Infinity) is null
    assert entries[3]["data"] == {"\ufffd": 1}
    snapshot = provider.get_snapshot(meta.session_id)
    assert not needs_cleaning(snapshot) and not needs_cleaning(list(provider.build_context(meta.session_id).messages))
    exported = "".join(provider.export_lines(meta.session_id)).split("\n")
    assert exported[1] == lines[0]  # untouched lines keep their bytes
    assert "\\ud800" not in "".join(exported) and "1e400" not in "".join(exported)


def test_a_parent_cycle_is_imported_reported_and_shown_as_a_diagnostic(provider, tmp_path):
    source = tmp_path / "cycle.jsonl"
    source.write_text(header_line() + "\n" + "\n".join(bad_content()["cycle"]) + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert meta.diagnostics["import"]["cycles"] == [["u3", "u2"]] or meta.diagnostics["import"]["cycles"] == [["u2", "u3"]]
    snapshot = provider.get_snapshot(meta.session_id)
    assert snapshot["pathError"]["kind"] == "cycle"
    assert snapshot["activePath"] and snapshot["activePath"][-1] == "u3"
    with pytest.raises(InvalidEntry, match="cycle"):
        provider.build_context(meta.session_id)
    assert provider.build_context(meta.session_id, "u1").messages  # the rest of the tree still works
    provider.switch_leaf(meta.session_id, "u1")  # and the session can be moved off the loop
    provider.append_message(meta.session_id, user_message("continue"))
    assert provider.get_snapshot(meta.session_id)["pathError"] is None


def test_entries_nested_deeper_than_the_c_parsers_go_are_kept_like_pi_keeps_them(provider, tmp_path):
    source = tmp_path / "deep.jsonl"
    source.write_text(header_line() + "\n" + "\n".join(bad_content()["deep-nesting"]) + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert meta.entry_count == 3 and meta.diagnostics["import"]["skippedLineCount"] == 0
    forget_process_caches()
    entries = provider.list_entries(meta.session_id)
    assert [e["id"] for e in entries] == ["u1", "d1", "u2"]
    assert jsonl.dumps(entries[1]["data"]) == jsonl.dumps(deep(1500))  # (== on it would recurse too deep)
    assert [e["id"] for e in provider.get_active_path(meta.session_id)] == ["u1", "d1", "u2"]
    assert "".join(provider.export_lines(meta.session_id)) == source.read_text()


@pytest.mark.oracle
def test_deep_entries_give_pis_context(provider, oracle, tmp_path):
    source = tmp_path / "deep.jsonl"
    lines = [
        user("u1", None, "hello"),
        jsonl.dumps({"type": "custom_message", "customType": "note", "content": [{"type": "text", "text": "t"}],
                     "display": True, "details": deep(1200), "id": "d1", "parentId": "u1", "timestamp": TS}),
        user("u2", "d1", "after"),
    ]  # fmt: skip
    source.write_text(header_line() + "\n" + "\n".join(lines) + "\n")
    result = subprocess.run([str(oracle), "context", str(source)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pi = jsonl.loads(result.stdout)
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    forget_process_caches()
    ctx = provider.build_context(meta.session_id)
    assert pi["messageEntryIds"] == ["u1", "d1", "u2"]
    assert ctx.source_entry_ids == pi["messageEntryIds"]
    header, entries, leaf = provider.session_source(meta.session_id)
    ours = session_view(header, entries, leaf, file_version=3)["messages"]
    assert jsonl.dumps(ours) == jsonl.dumps(pi["messages"]) == jsonl.dumps(list(ctx.messages))


# --------------------------------------------------------------------------- appends


def test_every_append_path_stores_clean_text_and_no_non_finite_number(provider):
    meta = provider.create_session(cwd="/w")
    sid = meta.session_id
    bad = "a\ud800b\udfffc"
    stored = [provider.append_message(sid, user_message(bad))]
    stored.append(provider.append_custom_entry(sid, custom_type="k\ud800", data={"\udc00": float("nan"), "x": [float("inf")]}))
    stored.append(provider.append_session_info(sid, name="name \ud800"))
    stored.append(provider.append_entry(sid, {"type": "custom", "customType": "z", "data": "\ud801"}))
    flight = provider.begin_in_flight(sid, assistant_message("start \ud800"))
    updated = provider.update_in_flight_entry(sid, flight["id"], assistant_message("more \udc00"))
    final = assistant_message("end \ud800")
    final["usage"]["cost"]["total"] = float("inf")
    stored.append(provider.finalize_in_flight(sid, flight["id"], final))
    for entry in [*stored, flight, updated]:
        assert not needs_cleaning(entry), entry  # what the caller gets back is what is stored
    assert stored[0]["message"]["content"][0]["text"] == "a\ufffdb\ufffdc"
    assert stored[1]["data"] == {"\ufffd": None, "x": [None]}
    assert provider.get_session(sid).title == "name \ufffd"
    assert stored[-1]["message"]["usage"]["cost"]["total"] is None
    forget_process_caches()
    entries = provider.list_entries(sid)
    assert entries == stored and not needs_cleaning(provider.get_snapshot(sid))
    assert not needs_cleaning(provider.events_since(sid, 0))
    text = "".join(provider.export_lines(sid))
    text.encode("utf-8")  # no lone surrogate anywhere
    assert "\\ud8" not in text and "NaN" not in text
    provider.append_message(sid, user_message("the session still works"))


def test_one_function_cleans_text_for_tools_and_the_store():
    from toolcatalog.protocol import clean_text as tool_clean_text

    assert tool_clean_text is clean_text
    assert clean_text("a\ud83d\ude00b\ud800") == "a\U0001f600b\ufffd"


# --------------------------------------------------------------------------- stored-bad sessions


def _reads(provider, sid: str) -> None:
    """Every read path; each may refuse with a SessionTreeError, none may raise anything else."""
    results = []
    for read in (
        lambda: provider.get_snapshot(sid),
        lambda: provider.list_entries(sid),
        lambda: provider.get_active_path(sid),
        lambda: list(provider.build_context(sid).messages),
        lambda: "".join(provider.export_lines(sid)),
        lambda: provider.get_diagnostics(sid),
        lambda: provider.session_source(sid),
        lambda: provider.get_in_flight(sid),
    ):
        try:
            results.append(read())
        except SessionTreeError:
            pass
    for entry in provider.list_entries(sid):
        try:
            results.append(list(provider.build_context(sid, entry["id"]).messages))
        except SessionTreeError:
            pass
    snapshot = provider.get_snapshot(sid)  # the snapshot never refuses
    assert snapshot["entries"]
    for value in results:
        assert not needs_cleaning(value)  # nothing a renderer or a socket would choke on


@pytest.mark.parametrize("case", list(bad_content()))
def test_no_read_of_a_stored_bad_session_fails(provider, tmp_path, case):
    sid = store_behind_back(provider, tmp_path, bad_content()[case])
    _reads(provider, sid)
    forget_process_caches()
    _reads(provider, sid)


def test_a_stored_row_that_is_not_json_is_shown_as_unreadable(mysql_alias, tmp_path):
    from sessions_tree.providers import get_provider

    provider = get_provider("mysql", using=mysql_alias)
    sid = store_behind_back(provider, tmp_path, [user("u1", None, "a"), '{"type":"message","id":"u2","parentId":"u1",', user("u3", "u2", "c")])
    entries = provider.list_entries(sid)
    assert [e["id"] for e in entries][::2] == ["u1", "u3"] and len(entries) == 3
    assert "netaUnreadable" in entries[1]
    _reads(provider, sid)


# --------------------------------------------------------------------------- MariaDB limits (every provider)


def test_ids_longer_than_the_columns_are_refused(provider, tmp_path):
    sid = provider.create_session(cwd="/w").session_id
    with pytest.raises(InvalidEntry) as refused:
        provider.append_entry(sid, {"type": "custom", "customType": "k", "id": "i" * 65})
    assert refused.value.field == "id"
    with pytest.raises(InvalidEntry) as refused:
        provider.append_entry(sid, {"type": "custom", "customType": "k", "parentId": "p" * 65})
    assert refused.value.field == "parentId"
    source = tmp_path / "long-id.jsonl"
    source.write_text(header_line() + "\n" + user("u1", None, "a") + "\n" + user("e" * 70, "u1", "b") + "\n")
    with pytest.raises(InvalidSessionFile) as refused:
        import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert refused.value.field == "line3.id" and "line 3" in str(refused.value)
    assert AgentSession.objects.using(provider.using).count() == 1


def test_a_long_session_name_is_refused_on_append_and_cut_for_the_title_on_import(provider, tmp_path):
    sid = provider.create_session(cwd="/w").session_id
    with pytest.raises(InvalidEntry) as refused:
        provider.append_session_info(sid, name="n" * 501)
    assert refused.value.field == "name"
    with pytest.raises(InvalidEntry) as refused:
        provider.update_session(sid, title="t" * 501)
    assert refused.value.field == "title"
    provider.append_entry(sid, {"type": "session_info", "name": "m" * 600})
    assert provider.get_session(sid).title == "m" * 500
    source = tmp_path / "named.jsonl"
    info = jsonl.dumps({"type": "session_info", "id": "s1", "parentId": "u1", "timestamp": TS, "name": "x" * 900})
    source.write_text(header_line() + "\n" + user("u1", None, "a") + "\n" + info + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert meta.title == "x" * 500 and provider.list_entries(meta.session_id)[1]["name"] == "x" * 900


def test_entries_over_the_size_limit_are_refused_before_the_database_sees_them(provider, tmp_path, settings):
    sid = provider.create_session(cwd="/w").session_id
    huge = "z" * (20 * 1024 * 1024)  # over MariaDB's max_allowed_packet (16 MiB here)
    with pytest.raises(InvalidEntry) as refused:
        provider.append_message(sid, user_message(huge))
    assert refused.value.field == "entry" and "NETA_MAX_ENTRY_BYTES" in str(refused.value)
    flight = provider.begin_in_flight(sid, assistant_message("ok"))
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_entry(sid, flight["id"], assistant_message(huge))
    provider.finalize_in_flight(sid, flight["id"])
    assert provider.get_session(sid).entry_count == 1
    source = tmp_path / "huge.jsonl"
    source.write_text(header_line() + "\n" + user("u1", None, huge) + "\n")
    with pytest.raises(InvalidSessionFile) as refused:
        import_session_file(source, provider_kind=provider.kind, using=provider.using)
    assert refused.value.field == "line2.entry"


def test_an_import_larger_than_one_packet_is_stored_in_batches(provider, tmp_path):
    source = tmp_path / "big.jsonl"
    lines, parent = [], None
    for i in range(6):  # 6 x 3 MiB: one INSERT of all of them would be over 16 MiB
        lines.append(user(f"u{i}", parent, f"{i}" * (3 * 1024 * 1024)))
        parent = f"u{i}"
    source.write_text(header_line() + "\n" + "\n".join(lines) + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    forget_process_caches()
    assert [e["id"] for e in provider.list_entries(meta.session_id)] == [f"u{i}" for i in range(6)]


def test_ids_that_differ_only_by_trailing_spaces_are_different_ids(provider, tmp_path):
    source = tmp_path / "spaces.jsonl"
    source.write_text(header_line() + "\n" + user("a1", None, "one") + "\n" + user("a1 ", "a1", "two") + "\n" + user("b1", "a1 ", "three") + "\n")
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    forget_process_caches()
    assert [e["id"] for e in provider.get_active_path(meta.session_id)] == ["a1", "a1 ", "b1"]
    assert provider.get_entry(meta.session_id, "a1")["message"]["content"][0]["text"] == "one"
    with pytest.raises(SessionNotFound):
        provider.get_session(meta.session_id + " ")
    assert AgentSession.objects.using(provider.using).filter(session_id=meta.session_id + " ").count() == 0


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_the_migration_makes_pad_space_id_columns_of_older_tables_exact(mysql_alias):
    from importlib import import_module

    from django.apps import apps
    from django.db import connections

    migration = import_module("sessions_tree.migrations.0002_id_columns_nopad_collation")
    connection = connections[mysql_alias]

    def collation() -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                "AND TABLE_NAME = 'sessions_tree_sessionentry' AND COLUMN_NAME = 'entry_id'"
            )
            return cursor.fetchone()[0]

    with connection.cursor() as cursor:  # the column as 0001 made it before
        cursor.execute("ALTER TABLE sessions_tree_sessionentry MODIFY entry_id varchar(80) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL")
    assert collation() == "utf8mb4_bin"
    with connection.schema_editor(atomic=False) as editor:
        migration.forwards(apps, editor)
    assert collation() in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
