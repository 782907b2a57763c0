"""Damaged session files (file provider): read what is whole, report the rest, never raise.

The damage is done to the file of a session Neta wrote, behind the provider's
back, with the meta row as it was: a cut at every byte offset inside the last
three entries, runs of NUL bytes (what a file system may show after a power
loss), and blocks of garbage in the middle of the file. For each damaged file:

- every read works and shows exactly the complete, valid lines (the same as
  Pi's reading, ``parse_session_text``, less an unterminated last line);
- the context is Pi's context over those entries at the persisted leaf (Pi's
  last entry when the leaf's line is gone);
- the damage is reported (``get_diagnostics``: malformed lines, the torn tail
  kept aside, a file shorter than acknowledged);
- the next append works, writes one whole line after the repaired tail and
  never glues two records; Neta and Pi then read the same entries.
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import tempfile
from pathlib import Path

import orjson
import pytest

from sessions_tree.context import build_session_context
from sessions_tree.jsonl import parse_session_text
from sessions_tree.models import AgentSession, SessionEvent
from sessions_tree.path import get_path
from sessions_tree.providers import get_provider
from tests.support.entries import assistant_message, forget_process_caches, tool_result, user_message

pytestmark = pytest.mark.django_db


class DamageBench:
    """One file-provider session, restored to its undamaged meta before every case."""

    def __init__(self):
        self.provider = get_provider("file")
        self.sid = build_session(self.provider)
        meta = self.provider.get_session(self.sid)
        self.path = Path(meta.session_file)
        self.original = self.path.read_bytes()
        self.saved = AgentSession.objects.filter(pk=meta.pk).values().get()
        self.leaf = meta.leaf_entry_id
        lines = self.original.split(b"\n")[:-1]
        starts, position = [], 0
        for line in lines:
            starts.append(position)
            position += len(line) + 1
        self.line_starts = starts  # offset of every line (header first)

    def damage(self, data: bytes) -> None:
        """Put ``data`` in the file (same inode, as a file system would) and the meta back."""
        with self.path.open("r+b") as fh:
            fh.write(data)
            fh.truncate()
        pk = self.saved["id"]
        AgentSession.objects.filter(pk=pk).update(**{k: v for k, v in self.saved.items() if k != "id"})
        SessionEvent.objects.filter(session_id=pk, revision__gt=self.saved["revision"]).delete()
        forget_process_caches()


def build_session(provider) -> str:
    """A small tree: a branch, a label, a model change, tool use, non-ASCII text at the end."""
    sid = provider.create_session(cwd="/corruption/test").session_id
    u1 = provider.append_message(sid, user_message("first question, ü"))
    a1 = provider.append_message(sid, assistant_message("first answer"))
    provider.append_message(sid, user_message("abandoned branch"))
    provider.switch_leaf(sid, a1["id"])
    provider.append_message(sid, user_message("second try 🎉"))
    provider.append_label_change(sid, target_id=u1["id"], label="start")
    provider.append_model_change(sid, provider="openai", model_id="gpt-test")
    provider.append_custom_message(sid, custom_type="note", content="a note", display=True)
    # The last three entries: the ones the cut sweep goes through.
    provider.append_message(sid, user_message("read ☃ the file — «ünïcödé» 日本語"))
    provider.append_message(sid, assistant_message("", tool_calls=[("call-1", "read", {"path": "ä/b.py"})]))
    provider.append_message(sid, tool_result("call-1", "read", "print('✓ done') 🐍"))
    return sid


@pytest.fixture
def bench(sessions_dir, settings):
    # The sweep appends (with fdatasync) some 600 times. Durability on a disk is the
    # crash test's subject; here it would only cost ~10 ms a case, so the files live
    # on a memory file system when there is one.
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="neta-corruption-", dir=shm))
        settings.NETA_SESSIONS_DIR = folder
        yield DamageBench()
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield DamageBench()


def complete_entries(data: bytes) -> list[dict]:
    """The entries of the complete (newline-terminated) lines that are valid JSON entries."""
    out = []
    for line in data.split(b"\n")[1:-1]:
        try:
            value = orjson.loads(line.decode("utf-8", errors="replace"))
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get("id"), str) and value.get("type") != "session":
            out.append(value)
    return out


def whole_tail(data: bytes) -> bytes | None:
    """The unterminated last line if it is one whole JSON entry (the repair keeps it)."""
    tail = data[data.rfind(b"\n") + 1 :]
    entries = complete_entries(b"\n" + tail + b"\n") if tail else []
    return tail if entries else None


def check_case(bench: DamageBench, damaged: bytes) -> dict:
    """Read the damaged file, then append once; returns the diagnostics it reported."""
    bench.damage(damaged)
    provider, sid = bench.provider, bench.sid
    tail = damaged[damaged.rfind(b"\n") + 1 :]
    revived = whole_tail(damaged)
    expected = complete_entries(damaged)
    ids = [e["id"] for e in expected]

    # Reads: exactly the complete valid lines; Pi reads the same (plus a whole unterminated tail).
    entries = provider.list_entries(sid)
    assert entries == expected
    pi = parse_session_text(damaged.decode("utf-8", errors="replace"))
    assert pi.entries == expected + complete_entries(b"\n" + tail + b"\n")
    ctx = provider.build_context(sid)
    pi_ctx = build_session_context(expected, bench.leaf)  # Pi: a leaf that is gone falls back to the last entry
    assert ctx.messages == pi_ctx.messages and ctx.source_entry_ids == pi_ctx.source_entry_ids
    leaf = bench.leaf if bench.leaf in ids else (ids[-1] if ids else None)
    path_ids = [e["id"] for e in get_path(expected, leaf)] if leaf else []
    assert [e["id"] for e in provider.get_active_path(sid)] == path_ids
    snapshot = provider.get_snapshot(sid)
    assert [e["id"] for e in snapshot["entries"]] == ids
    assert snapshot["leafId"] == leaf and snapshot["activePath"] == path_ids
    exported = "".join(provider.export_lines(sid)).encode()
    assert complete_entries(exported) == expected
    read_report = provider.get_diagnostics(sid)

    # The next append: after the repaired tail, one whole line, nothing glued.
    new = provider.append_message(sid, user_message("after the damage"))
    data = bench.path.read_bytes()
    kept = damaged + b"\n" if revived else damaged[: len(damaged) - len(tail)]
    assert data.startswith(kept) and data.endswith(b"\n")
    assert orjson.loads(data[len(kept) :]) == new, "the new entry is not one line of its own"
    repaired = expected + ([orjson.loads(revived)] if revived else [])
    parent = bench.leaf if bench.leaf in {e["id"] for e in repaired} else (repaired[-1]["id"] if repaired else None)
    assert new["parentId"] == parent
    after = provider.list_entries(sid)
    assert after == repaired + [new]
    assert parse_session_text(data.decode("utf-8", errors="replace")).entries == after
    forget_process_caches()
    assert provider.list_entries(sid) == after
    assert provider.build_context(sid).source_entry_ids[-1] == new["id"]
    report = provider.get_diagnostics(sid)
    if tail and not revived:  # the fragment is kept aside, not silently dropped
        torn = report["tornTails"][-1]
        assert torn["length"] == len(tail)
        assert tail.startswith(base64.b64decode(torn["fragmentBase64"]))
    return {"beforeAppend": read_report, "afterAppend": report}


def test_cut_at_every_offset_inside_the_last_three_entries(bench):
    start = bench.line_starts[-3]
    cuts = range(start, len(bench.original) + 1)
    assert len(cuts) > 300
    for cut in cuts:
        damaged = bench.original[:cut]
        report = check_case(bench, damaged)
        after = report["afterAppend"]
        if cut < len(bench.original):
            assert after["fileShrank"][-1] == {"acknowledgedSize": len(bench.original), "size": cut}
        else:
            assert "fileShrank" not in after and "tornTails" not in after


def test_nul_runs(bench):
    original, starts = bench.original, bench.line_starts
    mid = starts[5] + 40  # inside the sixth line
    cases = {
        "zeros appended (file extended after a crash)": original + b"\0" * 4096,
        "zeros inside one line": original[:mid] + b"\0" * 16 + original[mid + 16 :],
        "zeros over a newline": original[: starts[6] - 8] + b"\0" * 16 + original[starts[6] + 8 :],
        "a line of zeros": original[: starts[4]] + b"\0" * 512 + b"\n" + original[starts[4] :],
        "zeros instead of the last line": original[: starts[-1]] + b"\0" * (len(original) - starts[-1]),
        "zeros before a line": original[: starts[3]] + b"\0" * 9 + original[starts[3] :],
    }
    for name, damaged in cases.items():
        report = check_case(bench, damaged)
        read = report["beforeAppend"].get("read", {})
        whole_lines = damaged.count(b"\n") - 1 - len(complete_entries(damaged))
        assert read.get("malformedCount", 0) == whole_lines, name
        if damaged.endswith(b"\0"):
            assert report["afterAppend"]["tornTails"], name


def test_garbage_blocks_mid_file(bench):
    original, starts = bench.original, bench.line_starts
    for seed in range(12):
        rng = random.Random(seed)
        garbage = rng.randbytes(rng.randint(1, 300))
        at = rng.randint(starts[2], starts[-3])
        mode = seed % 3
        if mode == 0:  # overwrite
            damaged = original[:at] + garbage + original[at + len(garbage) :]
        elif mode == 1:  # insert
            damaged = original[:at] + garbage + original[at:]
        else:  # a line of garbage between two lines
            line = rng.choice(starts[2:-2])
            damaged = original[:line] + garbage.replace(b"\n", b" ") + b"\n" + original[line:]
        report = check_case(bench, damaged)
        read = report["beforeAppend"].get("read", {})
        assert read.get("malformedCount", 0) == damaged.count(b"\n") - 1 - len(complete_entries(damaged)), seed


def test_garbage_inside_a_line_keeps_its_prefix_intact(bench):
    """A damaged line whose start still looks like an entry is skipped, like Pi skips it."""
    original, starts = bench.original, bench.line_starts
    for k in range(1, len(starts) - 1):
        line = original[starts[k] : starts[k + 1] - 1]
        for where in (len(line) // 2, len(line) - 3):
            damaged = original[: starts[k] + where] + b"\x07}{" + original[starts[k] + where + 3 :]
            report = check_case(bench, damaged)
            assert report["beforeAppend"]["read"]["malformedCount"] == 1


def test_a_glued_line_is_skipped_like_pi_skips_it(bench):
    """A torn line that someone else (not Neta) appended to: one line, two objects."""
    original, starts = bench.original, bench.line_starts
    torn = original[starts[4] : starts[5] - 1][:50]
    damaged = original[: starts[4]] + torn + original[starts[4] :]
    report = check_case(bench, damaged)
    assert report["beforeAppend"]["read"]["malformedLines"] == [5]


def test_invalid_utf8_inside_a_string_reads_like_node(bench):
    """Node decodes bad UTF-8 as U+FFFD before JSON.parse; so does Neta's reading."""
    original = bench.original
    at = original.index("ü".encode())
    damaged = original[:at] + b"\xff" + original[at + 1 :]
    report = check_case(bench, damaged)
    assert report["beforeAppend"]["read"]["invalidUtf8Lines"] == 1
    text = bench.provider.list_entries(bench.sid)[0]["message"]["content"][0]["text"]
    assert text == "first question, \ufffd\ufffd"  # "ü" is C3 BC: FF BC is two bad bytes


def test_repeated_ids_read_like_pi_last_line_wins(sessions_dir, tmp_path):
    """Pi files can repeat an id (Pi's duplicate-flush bug): the last line with an id wins,
    also on the path a cold open finds while reading the file backwards."""
    from sessions_tree.pi_files import import_session_file

    header = '{"type":"session","version":3,"id":"0194c0de-0000-7000-8000-000000000001","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/dup"}'

    def line(entry_id, parent, text):
        parent_json = "null" if parent is None else f'"{parent}"'
        return (
            f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},"timestamp":"2025-01-01T00:00:01.000Z",'
            f'"message":{{"role":"user","content":"{text}","timestamp":1}}}}'
        )

    lines = [header, line("aaaa0001", None, "a"), line("bbbb0002", "aaaa0001", "b, first copy"),
             line("cccc0003", "bbbb0002", "c"), line("bbbb0002", "aaaa0001", "b, second copy"), line("dddd0004", "cccc0003", "d")]
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = import_session_file(path, provider_kind="file")
    provider = get_provider("file")
    forget_process_caches()
    ctx = provider.build_context(meta.session_id)
    pi = build_session_context(parse_session_text(path.read_text(encoding="utf-8")).entries, "dddd0004")
    assert ctx.messages == pi.messages
    assert [m["content"] for m in ctx.messages] == ["a", "b, second copy", "c", "d"]
