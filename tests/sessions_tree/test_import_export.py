"""Pi's own files through Neta's stores: import, context, export.

Every fixture Pi wrote (``../shared/pi-oracle/fixtures``) is imported into every
provider; the stored session gives Pi's context at every leaf the manifest lists,
and its export reproduces every valid entry line byte for byte. A session built
through Neta's API and exported gives Pi (the oracle) the context Neta builds.
"""

from __future__ import annotations

import io
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_tree import jsonl
from sessions_tree.errors import InvalidSessionFile
from sessions_tree.models import AgentSession
from sessions_tree.pi_files import import_session_file
from sessions_tree.pi_view import session_view
from tests.support.services import FIXTURES
from tests.support.entries import assistant_message, forget_process_caches, tool_result, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


def manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


def fixture_cases():
    for item in manifest()["fixtures"]:
        name = item["file"].removesuffix(".jsonl")
        yield pytest.param(item, None, f"{name}.expected.json", id=name)
        for leaf in item["leaves"].values():
            yield pytest.param(item, leaf, f"{name}.at-{leaf}.expected.json", id=f"{name}@{leaf}")


def valid_entry_lines(path: Path) -> list[str]:
    """The lines Pi keeps as entries (parsed objects after the first header, not headers)."""
    parsed = jsonl.parse_session_text(path.read_bytes().decode("utf-8"))
    return parsed.raw_lines


@pytest.mark.parametrize("item, leaf, expected_name", list(fixture_cases()))
def test_imported_fixture_gives_pis_context(provider, item, leaf, expected_name):
    expected = json.loads((FIXTURES / expected_name).read_text())
    meta = import_session_file(FIXTURES / item["file"], provider_kind=provider.kind, using=provider.using)
    forget_process_caches()
    header, entries, stored_leaf = provider.session_source(meta.session_id)
    assert stored_leaf == (entries[-1]["id"] if entries else None)  # Pi's leaf: the last line
    canonical = bool(item.get("canonicalIds"))
    chosen = stored_leaf
    if leaf is not None:
        chosen = leaf
        if canonical:  # leaves are given as e1, e2, … for v1 files
            chosen = entries[int(leaf[1:]) - 1]["id"]
    view = session_view(header, entries, chosen, file_version=expected["fileVersion"], canonical_ids=canonical)
    assert view == expected
    # The stored context (the provider's own path walk and cache) agrees.
    ctx = provider.build_context(meta.session_id, chosen)
    assert ctx.messages == view["messages"] or canonical
    if not canonical:
        assert ctx.source_entry_ids == expected["messageEntryIds"]


@pytest.mark.parametrize("item", [p.values[0] for p in fixture_cases() if p.values[1] is None], ids=lambda i: i["file"])
def test_import_then_export_reproduces_every_valid_line(provider, item):
    source = FIXTURES / item["file"]
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    forget_process_caches()
    exported = "".join(provider.export_lines(meta.session_id)).split("\n")
    assert exported[-1] == ""  # ends with a newline
    header_line, entry_lines = exported[0], exported[1:-1]
    assert json.loads(header_line)["type"] == "session"
    original = jsonl.parse_session_text(source.read_bytes().decode("utf-8"))
    if original.file_version == 3:
        assert entry_lines == valid_entry_lines(source)
        assert header_line == original.header_line
    else:  # migrated on import (as Pi rewrites it): same entries, re-serialized
        assert [json.loads(line)["type"] for line in entry_lines] == [e["type"] for e in original.entries]
        assert json.loads(header_line)["version"] == 3


def test_session_context_command_on_a_stored_session(sessions_dir):
    meta = import_session_file(FIXTURES / "02-branches.jsonl")
    out = io.StringIO()
    call_command("session_context", meta.session_id, stdout=out)
    assert out.getvalue() == (FIXTURES / "02-branches.expected.json").read_text()
    out = io.StringIO()
    call_command("session_context", meta.session_id, "--leaf", "045bd46c", stdout=out)
    assert out.getvalue() == (FIXTURES / "02-branches.at-045bd46c.expected.json").read_text()
    with pytest.raises(CommandError):
        call_command("session_context", "no-such-session", stdout=io.StringIO())


def test_session_import_command(sessions_dir, tmp_path):
    not_a_session = tmp_path / "notes.jsonl"
    not_a_session.write_text('{"hello": "world"}\n{"type":"message","id":"x","parentId":null}\n')
    before = not_a_session.read_bytes()
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("session_import", str(FIXTURES / "01-linear.jsonl"), str(not_a_session), stdout=out, stderr=err)
    assert failure.value.returncode == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    session_id, count, path = lines[0].split("\t")
    assert count == "19" and path.endswith("01-linear.jsonl")
    assert AgentSession.objects.filter(session_id=session_id).exists()
    assert "not a Pi session file" in err.getvalue()
    assert not_a_session.read_bytes() == before  # a bad header never wipes a file
    assert AgentSession.objects.count() == 1  # nothing imported from the bad file
    # The same session again gets a fresh id (the original is left alone), and says so.
    out, err = io.StringIO(), io.StringIO()
    call_command("session_import", str(FIXTURES / "01-linear.jsonl"), stdout=out, stderr=err)
    second = out.getvalue().split("\t")[0]
    assert second != session_id and AgentSession.objects.count() == 2
    assert f"{session_id} is taken; imported as {second}" in err.getvalue()


def test_import_refuses_files_that_are_not_sessions(sessions_dir, tmp_path):
    for name, content in {
        "empty.jsonl": b"",
        "blank.jsonl": b"\n \n",
        "garbage.jsonl": b"\x00\x01garbage",
        "entry-first.jsonl": b'{"type":"message","id":"a","parentId":null,"timestamp":"x","message":{"role":"user","content":"x"}}\n',
    }.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(InvalidSessionFile):
            import_session_file(path)
        assert path.read_bytes() == content
    with pytest.raises(InvalidSessionFile):
        import_session_file(tmp_path / "missing.jsonl")
    assert AgentSession.objects.count() == 0


def test_session_export_and_tree_commands(sessions_dir, tmp_path):
    meta = import_session_file(FIXTURES / "02-branches.jsonl")
    target = tmp_path / "out.jsonl"
    call_command("session_export", meta.session_id, "-o", str(target), stderr=io.StringIO())
    assert target.read_text().split("\n")[1:-1] == valid_entry_lines(FIXTURES / "02-branches.jsonl")
    out = io.StringIO()
    call_command("session_tree", meta.session_id, stdout=out)
    text = out.getvalue()
    assert text.count("\n") == meta.entry_count
    assert "◀ leaf" in text and text.count("◀ leaf") == 1
    labels = json.loads((FIXTURES / "02-branches.expected.json").read_text())["labels"]
    for target_id, label in labels.items():
        assert f"{target_id} [{label}]" in text
    with pytest.raises(CommandError):
        call_command("session_tree", "nope", stdout=io.StringIO())


def build_api_session(provider) -> tuple[str, list[str]]:
    """A session with everything the API can write; returns (id, leaves worth checking)."""
    sid = provider.create_session(cwd="/home/u/proj").session_id
    provider.append_model_change(sid, provider="anthropic", model_id="claude-test")
    provider.append_thinking_level_change(sid, "high")
    u1 = provider.append_message(sid, user_message("Write fib.py — with ünïcödé 🎉"))
    provider.append_message(sid, assistant_message("", tool_calls=[("c1", "write", {"path": "fib.py", "content": "x"})]))
    provider.append_message(sid, tool_result("c1", "write", "ok"))
    a2 = provider.append_message(sid, assistant_message("Done. Cost 0.000009"))
    provider.append_label_change(sid, target_id=u1["id"], label="start")
    branch_leaf = provider.append_message(sid, user_message("try another way"))["id"]
    provider.append_branch_summary(sid, from_entry_id=a2["id"], summary="Tried another way; abandoned.", details={"readFiles": [], "modifiedFiles": ["fib.py"]}, from_hook=False)
    provider.append_compaction(sid, summary="## Goal\nfib", first_kept_entry_id=a2["id"], tokens_before=321, details={"readFiles": [], "modifiedFiles": ["fib.py"]}, from_hook=False)
    provider.append_custom_message(sid, custom_type="note", content=[{"type": "text", "text": "remember"}], display=False, details={"k": 1})
    provider.append_custom_entry(sid, custom_type="state", data={"n": 1})
    provider.append_session_info(sid, name="fib work")
    provider.append_subagent_batch(sid, batch_id="b1", mode="single", runs=[{"runId": "r1"}])
    provider.append_subagent_result(sid, batch_id="b1", run_id="r1", agent="scout", status="completed", content=[{"type": "text", "text": "found"}])
    entry = provider.begin_in_flight(sid, assistant_message(""))
    provider.finalize_in_flight(sid, entry["id"], assistant_message("partial", stop_reason="aborted"), status="aborted")
    provider.append_label_change(sid, target_id=u1["id"], label=None)
    return sid, [branch_leaf, a2["id"]]


@pytest.mark.oracle
def test_sessions_written_through_the_api_read_back_the_same_in_pi(provider, oracle, tmp_path):
    sid, other_leaves = build_api_session(provider)
    path = tmp_path / "api.jsonl"
    path.write_text("".join(provider.export_lines(sid)))
    header, entries, leaf = provider.session_source(sid)
    # ``oracle context FILE [LEAF]`` for every leaf, in one process (Pi loads once).
    chosen_leaves = [leaf, *other_leaves]
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"file": str(path), **({"leaf": chosen} if chosen != leaf else {})} for chosen in chosen_leaves]))
    result = subprocess.run([str(oracle), "context-batch", str(jobs)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    read = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["index"] for line in read] == list(range(len(chosen_leaves))), result.stdout
    for chosen, line in zip(chosen_leaves, read):
        assert line["ok"], line
        pi = line["result"]
        ours = session_view(header, entries, chosen, file_version=3)
        assert ours == pi
        ctx = provider.build_context(sid, chosen)
        assert ctx.messages == pi["messages"]
        assert ctx.source_entry_ids == pi["messageEntryIds"]


def test_streamed_export_is_the_lines_reads_show(provider, monkeypatch):
    """``export_lines`` streams from the store (file chunks, row pages), and yields
    exactly the lines the index holds: the header, every stored entry, never the entry
    in flight; across chunk and page boundaries and after a damaged line."""
    from sessions_tree.providers import file as file_provider
    from sessions_tree.providers import mysql as mysql_provider
    from sessions_tree.providers.base import SessionTreeProvider

    monkeypatch.setattr(file_provider, "EXPORT_CHUNK", 300)  # a few lines a chunk, lines cut across
    monkeypatch.setattr(mysql_provider, "_EXPORT_PAGE", 3)
    meta = provider.create_session(cwd="/w")
    sid = meta.session_id
    for i in range(10):
        provider.append_message(sid, user_message(f"question {i} " + "x" * (i * 40)))
        provider.append_message(sid, assistant_message(f"answer {i}"))
    if provider.kind == "file":
        with open(provider.get_session(sid).session_file, "ab") as fh:
            fh.write(b"{not json\n")  # damage behind Neta's back: skipped, as reads skip it
        provider.append_message(sid, user_message("after the damage"))
    provider.begin_in_flight(sid, assistant_message("streaming"))

    def indexed() -> list[str]:
        forget_process_caches()
        return list(SessionTreeProvider.export_lines(provider, sid))

    streamed = list(provider.export_lines(sid))
    assert streamed == indexed()
    assert len(streamed) == 1 + provider.get_session(sid).entry_count
    assert not any('"streaming"' in line for line in streamed)



def _imported(provider, path: Path, entries: int) -> str:
    """A linear session of ``entries`` messages of ~4 KB, imported into ``provider``."""
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    lines = [json.dumps(header)]
    parent = None
    for i in range(entries):
        entry = {"type": "message", "id": f"{i:08x}", "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": user_message(f"{i} " + "y" * 4000)}
        lines.append(json.dumps(entry))
        parent = entry["id"]
    path.write_text("\n".join(lines) + "\n")
    return import_session_file(path, provider_kind=provider.kind, using=provider.using).session_id


def test_export_to_a_file_is_streamed(provider, tmp_path):
    """``session_export -o`` (``export_session``) writes the Pi file without holding it:
    Python's peak allocation while exporting a 12 MB session is no more than while
    exporting a 4 MB one (lines go out a megabyte at a time, rows are read a page at a
    time), and the file is the streamed lines with no temp file left beside it. The
    session's index is read first, as any read of it does (it is the process's cache,
    bounded by ``NETA_INDEX_CACHE_ENTRIES``, not the export's)."""
    import tracemalloc

    from sessions_tree.pi_files import export_session

    peaks = {}
    for entries in (1000, 3000):
        sid = _imported(provider, tmp_path / f"in-{entries}.jsonl", entries)
        provider.build_context(sid)
        target = tmp_path / f"out-{entries}" / "exported.jsonl"
        tracemalloc.start()
        try:
            export_session(sid, target, using=provider.using)
            _, peaks[entries] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert target.read_text() == "".join(provider.export_lines(sid))
        assert target.read_text().count("\n") == entries + 1
        assert [p.name for p in target.parent.iterdir()] == ["exported.jsonl"]
    assert (tmp_path / "out-3000" / "exported.jsonl").stat().st_size > 12_000_000
    # Whole in memory, the 3000-entry export would peak at ~3x the 1000-entry one.
    assert peaks[3000] < peaks[1000] * 1.3 + 500_000, peaks
