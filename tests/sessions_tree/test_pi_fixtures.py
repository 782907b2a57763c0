"""Neta builds from a session file exactly what Pi builds.

- Every fixture Pi wrote (``pi-oracle/fixtures``), at every leaf its manifest
  lists: ``session_context --file`` prints the ``*.expected.json`` byte for byte.
- Oracle round trip: sessions made with Neta's entry builders and written with
  ``jsonl.dumps`` are opened by Pi's own code (``oracle context-batch``); Pi's
  view equals ``session_view`` of what Neta holds in memory and of what it reads
  back from the file.
- Oracle fuzz: damaged and odd files (duplicate ids, orphans, self-parents,
  cycles, invalid timestamps, odd ids, extra headers, v1/v2 files...) give the
  same output as Pi, or an error exactly where the oracle refuses too.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_tree import entries as E
from sessions_tree.ids import ms_to_iso, new_entry_id, new_session_id
from sessions_tree.jsonl import dumps, dumps_pretty
from sessions_tree.path import PathError, get_path
from sessions_tree.pi_view import DEFAULT, session_view
from sessions_tree.tree import TreeTooLargeError
from tests.support.entries import pi_view_of_file
from tests.support.services import FIXTURES, REPO

# --------------------------------------------------------------------------- fixtures


def _fixture_cases():
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    cases = []
    for fixture in manifest["fixtures"]:
        for expected in fixture["expected"]:
            stem = expected.removesuffix(".expected.json")
            leaf = stem.split(".at-", 1)[1] if ".at-" in stem else None
            cases.append(
                pytest.param(fixture["file"], expected, leaf, bool(fixture.get("canonicalIds")), id=expected)
            )
    return cases


def _run_command(**options) -> str:
    out = io.StringIO()
    call_command("session_context", stdout=out, **options)
    return out.getvalue()


@pytest.mark.parametrize(("jsonl_name", "expected_name", "leaf", "canonical"), _fixture_cases())
def test_fixture_context_equals_pi(jsonl_name, expected_name, leaf, canonical):
    expected_bytes = (FIXTURES / expected_name).read_bytes()
    options = {"file": str(FIXTURES / jsonl_name), "canonical_ids": canonical}
    if leaf:
        options["leaf"] = leaf
    printed = _run_command(**options)
    ours, theirs = json.loads(printed), json.loads(expected_bytes)
    assert list(ours) == list(theirs)
    for field in theirs:
        assert ours[field] == theirs[field], field
    assert printed.encode("utf-8") == expected_bytes


def test_manifest_lists_every_expected_file():
    listed = {c.values[1] for c in _fixture_cases()}
    on_disk = {p.name for p in FIXTURES.glob("*.expected.json")} - {"skills.expected.json"}
    assert listed == on_disk and len(listed) >= 18


def test_root_leaf_is_empty_context():
    view = json.loads(_run_command(file=str(FIXTURES / "02-branches.jsonl"), leaf="@root"))
    assert view["leafId"] is None and view["messages"] == [] and view["thinkingLevel"] == "off"
    assert view["model"] is None and view["messageEntryIds"] == [] and view["entryCount"] > 0


def test_command_errors_are_clear():
    with pytest.raises(CommandError, match="no such file") as missing:
        _run_command(file="/nonexistent/x.jsonl")
    assert missing.value.returncode == 2
    with pytest.raises(CommandError, match="Entry nope not found"):
        _run_command(file=str(FIXTURES / "01-linear.jsonl"), leaf="nope")
    with pytest.raises(CommandError, match="not a Pi session file"):
        _run_command(file=str(FIXTURES / "manifest.json"))
    with pytest.raises(CommandError, match="either a SESSION_ID or --file"):
        _run_command()


def _manage(*args, cwd=REPO):
    return subprocess.run([sys.executable, "manage.py", "session_context", *args], cwd=cwd, capture_output=True)


def test_command_process_output_and_exit_codes(tmp_path):
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_bytes((FIXTURES / "legacy-v1.jsonl").read_bytes())
    before = legacy.read_bytes(), legacy.stat().st_mtime_ns
    done = _manage("--file", str(legacy), "--canonical-ids")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (FIXTURES / "legacy-v1.expected.json").read_bytes()
    assert (legacy.read_bytes(), legacy.stat().st_mtime_ns) == before  # migrated in memory only

    cycle = tmp_path / "cycle.jsonl"
    cycle.write_text(
        dumps(E.session_header(session_id="s", timestamp="2025-01-01T00:00:00.000Z", cwd="/"))
        + "\n"
        + dumps(E.custom_entry(id="a", parent_id="b", timestamp="2025-01-01T00:00:01.000Z", custom_type="x"))
        + "\n"
        + dumps(E.custom_entry(id="b", parent_id="a", timestamp="2025-01-01T00:00:02.000Z", custom_type="x"))
        + "\n"
    )
    for args, message in (
        (["--file", str(cycle)], b"parent cycle"),
        (["--file", str(tmp_path / "missing.jsonl")], b"no such file"),
        (["--file", str(FIXTURES / "01-linear.jsonl"), "--leaf", "zzz"], b"Entry zzz not found"),
    ):
        done = _manage(*args)
        assert done.returncode == 2, args
        assert done.stdout == b""
        assert message in done.stderr


# --------------------------------------------------------------------------- session generator

TEXTS = ["hello", "é ü ß", "😀 emoji", "中文", "\ud800 lone high", "x\udfffy", "\ud83d\ude00 pair as two",
         "tab\tnew\nline", 'quote " back \\', "\u2028\u2029", "\x00ctl\x1f\x7f", "", "  padded  "]
FLOATS = [0.000009, 1e-7, 5.0, -0.0, 1e21, 0.1 + 0.2, 0.00015, 123456.789, 2**60, 1.5e-10, 0, 3e-6, 1e16]


def _text(rng) -> str:
    return "".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 3)))


def _usage(rng) -> dict:
    return {
        "input": rng.randint(0, 5000), "output": rng.randint(0, 900), "cacheRead": rng.choice([0, 1000]),
        "cacheWrite": rng.choice([0, 20]), "totalTokens": rng.choice([0, 1234, 6000]),
        "cost": {k: rng.choice(FLOATS) for k in ("input", "output", "cacheRead", "cacheWrite", "total")},
    }


def _message(rng, kind: str, ts: int) -> dict:
    if kind == "user":
        content = _text(rng) if rng.random() < 0.3 else [{"type": "text", "text": _text(rng)}]
        if rng.random() < 0.15:
            content = [{"type": "text", "text": "see"}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
        return {"role": "user", "content": content, "timestamp": ts}
    if kind == "assistant":
        blocks = []
        if rng.random() < 0.4:
            blocks.append({"type": "thinking", "thinking": _text(rng), "thinkingSignature": "sig"})
        blocks.append({"type": "text", "text": _text(rng)})
        if rng.random() < 0.5:
            args = {"path": rng.choice(["a.py", "dir/é.txt"]), "b": 1, "10": [1.0, 2e-7], "2": {"x": None}}
            blocks.append({"type": "toolCall", "id": "toolu_" + new_entry_id(()), "name": "read", "arguments": args})
        message = {"role": "assistant", "content": blocks, "api": "anthropic-messages"}
        if rng.random() < 0.9:
            message["provider"] = rng.choice(["anthropic", "openai"])
            message["model"] = rng.choice(["claude-sonnet-4-5", "gpt-5"])
        message["usage"] = _usage(rng)
        message["stopReason"] = rng.choice(["stop", "toolUse", "length", "aborted", "error"])
        if message["stopReason"] == "error":
            message["errorMessage"] = "overloaded 😀"
        message["timestamp"] = ts
        return message
    if kind == "toolResult":
        content = [{"type": "text", "text": _text(rng)}]
        if rng.random() < 0.2:
            content.append({"type": "image", "data": "AAAA", "mimeType": "image/jpeg"})
        message = {"role": "toolResult", "toolCallId": "toolu_1", "toolName": "read", "content": content}
        if rng.random() < 0.5:
            message["details"] = {"lines": rng.randint(0, 9), "ratio": rng.choice(FLOATS)}
        message.update(isError=rng.random() < 0.2, timestamp=ts)
        return message
    if kind == "bashExecution":
        message = {"role": "bashExecution", "command": "ls " + _text(rng), "output": rng.choice(["", "a\nb", _text(rng)]),
                   "exitCode": rng.choice([0, 1, 127, None]), "cancelled": rng.random() < 0.2,
                   "truncated": rng.random() < 0.3}
        if message["truncated"] and rng.random() < 0.7:
            message["fullOutputPath"] = "/tmp/out.txt"
        message["timestamp"] = ts
        if rng.random() < 0.3:
            message["excludeFromContext"] = True
        return message
    # extension message stored as a message entry (what the v2->v3 migration produces)
    return {"role": "custom", "customType": "note", "content": _text(rng), "display": True, "timestamp": ts}


def random_session(rng: random.Random, steps: int) -> tuple[dict, list[dict]]:
    t = 1_748_855_645_120 + rng.randint(0, 10**9)
    header = E.session_header(session_id=new_session_id(), timestamp=ms_to_iso(t), cwd="/home/user/projects/é")
    entries: list[dict] = []
    ids: set[str] = set()
    order: list[str] = []
    leaf = None
    kinds = ["user", "assistant", "toolResult", "bashExecution", "custom_role", "thinking", "model", "compaction",
             "branch_summary", "custom", "custom_message", "label", "session_info", "subagent", "navigate"]
    weights = [14, 14, 6, 3, 1, 2, 2, 3, 3, 2, 3, 4, 2, 2, 7]
    for _ in range(steps):
        kind = rng.choices(kinds, weights)[0]
        if kind == "navigate":
            leaf = rng.choice([None, *order]) if order and rng.random() > 0.1 else None
            continue
        t += rng.choice([0, 1, 7, 1000, 60_000, -2000])  # equal and decreasing timestamps on purpose
        ts = ms_to_iso(t)
        eid = new_entry_id(ids)
        base = {"id": eid, "parent_id": leaf, "timestamp": ts}
        if kind in ("user", "assistant", "toolResult", "bashExecution", "custom_role"):
            entry = E.message_entry(**base, message=_message(rng, kind.removesuffix("_role").replace("custom", "custom"), t - 300))
        elif kind == "thinking":
            entry = E.thinking_level_change_entry(**base, thinking_level=rng.choice(["off", "low", "high"]))
        elif kind == "model":
            entry = E.model_change_entry(**base, provider="openai", model_id=rng.choice(["gpt-5", "o3"]))
        elif kind == "compaction":
            path_ids = [e["id"] for e in get_path(entries, leaf)] if leaf else []
            first_kept = rng.choice([*path_ids, "nope0000", *(order[:3])]) if (path_ids or order) else "nope0000"
            entry = E.compaction_entry(**base, summary=_text(rng) or "s", first_kept_entry_id=first_kept,
                                       tokens_before=rng.randint(100, 9000),
                                       details={"readFiles": ["a"], "modifiedFiles": []} if rng.random() < 0.5 else None,
                                       from_hook=rng.choice([None, False, True]))
        elif kind == "branch_summary":
            entry = E.branch_summary_entry(**base, from_id=leaf or "root", summary=rng.choice(["", _text(rng) or "x"]),
                                           details=rng.choice([None, {"readFiles": [], "modifiedFiles": ["b"]}]),
                                           from_hook=rng.choice([None, False]))
        elif kind == "custom":
            entry = E.custom_entry(**base, custom_type="ext", data=rng.choice([E.MISSING, None, {"k": [1, 2.5]}]))
        elif kind == "custom_message":
            content = rng.choice([_text(rng), [{"type": "text", "text": _text(rng)}]])
            entry = E.custom_message_entry(**base, custom_type="note", content=content, display=rng.random() < 0.5,
                                           details=rng.choice([None, {"why": "test"}]))
        elif kind == "label":
            if not order:
                continue
            entry = E.label_entry(**base, target_id=rng.choice(order), label=rng.choice([None, "", "keep", "é-label", "b"]))
        elif kind == "session_info":
            entry = E.session_info_entry(**base, name=rng.choice(["  My session ", "", "名前", "x"]))
        else:
            if rng.random() < 0.5:
                entry = E.subagent_batch_entry(**base, batch_id="b1", mode="parallel",
                                               runs=[{"runId": "r1", "agent": "scout", "task": _text(rng)}])
            else:
                entry = E.subagent_result_entry(**base, batch_id="b1", run_id="r1", agent="scout", status="completed",
                                                content=[{"type": "text", "text": _text(rng)}],
                                                details=rng.choice([None, {"turns": 2}]), is_error=rng.random() < 0.2)
        entries.append(entry)
        ids.add(eid)
        order.append(eid)
        leaf = eid
    return header, entries


def write_session(path: Path, header: dict, entries: list[dict]) -> None:
    path.write_text("".join(dumps(x) + "\n" for x in [header, *entries]), encoding="utf-8")


def _run_oracle_batch(oracle, tmp_path: Path, jobs: list[dict]) -> list[bytes]:
    for i, job in enumerate(jobs):
        job["out"] = str(tmp_path / f"oracle-{i}.json")
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    done = subprocess.run([str(oracle), "context-batch", str(jobs_file)], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [Path(job["out"]).read_bytes() for job in jobs]


def _leaf_arg(leaf):
    return None if leaf is DEFAULT else ("@root" if leaf is None else leaf)


@pytest.mark.oracle
def test_oracle_round_trip_of_generated_sessions(oracle, tmp_path):
    rng = random.Random(20250602)
    jobs, ours = [], []
    for n in range(40):
        header, entries = random_session(rng, rng.randint(1, 60))
        path = tmp_path / f"s{n}.jsonl"
        write_session(path, header, entries)
        ids = [e["id"] for e in entries]
        leaves = [DEFAULT, None, *rng.sample(ids, min(2, len(ids)))]
        for leaf in leaves:
            canonical = rng.random() < 0.2
            in_memory = dumps_pretty(session_view(header, entries, leaf, file_version=3, canonical_ids=canonical))
            from_file = pi_view_of_file(path, leaf, canonical)
            assert from_file == in_memory.encode("utf-8")
            jobs.append({"file": str(path), "leaf": _leaf_arg(leaf), "canonical": canonical})
            ours.append(from_file)
    theirs = _run_oracle_batch(oracle, tmp_path, jobs)
    for job, mine, pi in zip(jobs, ours, theirs, strict=True):
        assert mine == pi, job


# --------------------------------------------------------------------------- fuzz

def _line(obj) -> str:
    return dumps(obj)


def _mutate(rng: random.Random, header: dict, entries: list[dict]) -> str:
    """Session text with Pi-readable damage and oddities."""
    header = dict(header)
    entries = [json.loads(json.dumps(e)) for e in entries]  # deep copies (json keeps surrogates)
    ids = [e["id"] for e in entries]
    for e in entries:
        r = rng.random()
        if r < 0.05:
            e["timestamp"] = rng.choice(["garbage", "2025-02-30", 12345, None, "2025-06-02T09:14:05.1234567Z"])
        elif r < 0.08:
            e.pop("timestamp")
        elif r < 0.10 and ids:
            e["parentId"] = rng.choice(["missing9", "", e["id"]])  # orphan, falsy, self-parent
        elif r < 0.12 and e["type"] == "thinking_level_change":
            e.pop("thinkingLevel")
        elif r < 0.14 and e["type"] == "model_change":
            e.pop("modelId")
        elif r < 0.16 and e["type"] == "message":
            e["message"]["9"] = "integer-like key"
            e["message"]["01"] = "not an index"
    lines = [_line(header)] + [_line(e) for e in entries]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i and rng.random() < 0.05:
            out.append(line)  # duplicate line (duplicate id)
        if rng.random() < 0.03:
            out.append(rng.choice(["", "   ", "{not json", '{"type":"message"', _line(header)]))
    text = "\n".join(out) + rng.choice(["\n", "", "\n\n", "\r\n"])
    if rng.random() < 0.2:
        text = "\ufeff" + text
    if rng.random() < 0.1:
        text = text.replace("\n", "\r\n")
    return text


HAND_MADE = {
    "version-string.jsonl": [
        {"type": "session", "version": "2", "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "hookMessage", "customType": "h", "content": "hook", "display": True, "timestamp": 1}},
    ],
    "v1-extra-header.jsonl": [
        {"type": "session", "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": "one", "timestamp": 1}},
        {"type": "session", "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z", "message": {"role": "user", "content": "two", "timestamp": 2}},
        {"type": "message", "id": "old", "timestamp": "2025-01-01T00:00:03.000Z", "message": {"role": "user", "content": "three", "timestamp": 3}},
        {"type": "compaction", "timestamp": "2025-01-01T00:00:04.000Z", "summary": "S", "firstKeptEntryIndex": 3, "tokensBefore": 5},
        {"type": "compaction", "timestamp": "2025-01-01T00:00:05.000Z", "summary": "T", "firstKeptEntryIndex": 7, "tokensBefore": 5},
        {"type": "message", "id": "late", "timestamp": "2025-01-01T00:00:06.000Z", "message": {"role": "user", "content": "four", "timestamp": 4}},
    ],
    "v1-index-forward.jsonl": [
        {"type": "session", "version": 1, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": "one", "timestamp": 1}},
        {"type": "compaction", "timestamp": "2025-01-01T00:00:04.000Z", "summary": "S", "firstKeptEntryIndex": 1, "tokensBefore": 5},
        {"type": "message", "timestamp": "2025-01-01T00:00:06.000Z", "message": {"role": "user", "content": "two", "timestamp": 4}},
    ],
    "odd-ids.jsonl": [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "id": 5, "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": "n", "timestamp": 1}},
        {"type": "message", "id": "12345678", "parentId": 5.0, "timestamp": "2025-01-01T00:00:02.000Z", "message": {"role": "user", "content": "m", "timestamp": 2}},
        {"type": "label", "id": "l1", "parentId": "12345678", "timestamp": "2025-01-01T00:00:03.000Z", "targetId": "12345678", "label": "digits"},
        {"type": "label", "id": "l2", "parentId": "l1", "timestamp": "2025-01-01T00:00:03.000Z", "targetId": 5, "label": "five"},
        {"type": "thinking_level_change", "id": "t", "parentId": "l2", "timestamp": "2025-01-01T00:00:04.000Z", "thinkingLevel": None},
        {"type": "custom", "parentId": "t", "timestamp": "2025-01-01T00:00:05.000Z", "customType": "no-id"},
    ],
    "nan-sort.jsonl": [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "custom", "customType": "r", "id": "r", "parentId": None, "timestamp": "2025-01-01T00:00:00.000Z"},
        *[
            {"type": "custom", "customType": "c", "id": f"c{i}", "parentId": "r", "timestamp": ts}
            for i, ts in enumerate(["2025-01-01T00:00:09.000Z", "bad", "2025-01-01T00:00:01.000Z", None,
                                    "2025-01-01T00:00:05.000Z", "2025-01-01T00:00:03.000Z", "also bad",
                                    "2025-01-01T00:00:02.000Z", "2025-01-01T00:00:02.000Z", 7])
        ],
    ],
    "cycle.jsonl": [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "custom", "customType": "x", "id": "a", "parentId": "c", "timestamp": "2025-01-01T00:00:01.000Z"},
        {"type": "custom", "customType": "x", "id": "b", "parentId": "a", "timestamp": "2025-01-01T00:00:02.000Z"},
        {"type": "custom", "customType": "x", "id": "c", "parentId": "b", "timestamp": "2025-01-01T00:00:03.000Z"},
    ],
    "self-parent-leaf.jsonl": [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "custom", "customType": "x", "id": "a", "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z"},
        {"type": "custom", "customType": "x", "id": "b", "parentId": "b", "timestamp": "2025-01-01T00:00:02.000Z"},
    ],
}


@pytest.mark.oracle
def test_oracle_fuzz_odd_and_damaged_files(oracle, tmp_path):
    rng = random.Random(1743760810)
    jobs, ours = [], []

    def add(path: Path, leaf, canonical: bool) -> None:
        try:
            mine = pi_view_of_file(path, leaf, canonical)
        except (PathError, TreeTooLargeError) as exc:
            mine = exc
        jobs.append({"file": str(path), "leaf": _leaf_arg(leaf), "canonical": canonical})
        ours.append(mine)

    for name, lines in HAND_MADE.items():
        path = tmp_path / name
        path.write_text("".join(dumps(x) + "\n" for x in lines), encoding="utf-8")
        canonical = name.startswith("v1")
        add(path, DEFAULT, canonical)
        for x in lines[1:]:
            if isinstance(x.get("id"), str):
                add(path, x["id"], canonical)
    for n in range(60):
        header, entries = random_session(rng, rng.randint(1, 40))
        if rng.random() < 0.15:
            header.pop("version")  # a v1 file: ids are re-made, compare canonically
        path = tmp_path / f"fuzz{n}.jsonl"
        path.write_text(_mutate(rng, header, entries), encoding="utf-8")
        canonical = "version" not in header
        leaves = [DEFAULT] + ([] if canonical else rng.sample([e["id"] for e in entries], min(2, len(entries))))
        for leaf in leaves:
            add(path, leaf, canonical)

    theirs = _run_oracle_batch(oracle, tmp_path, jobs)
    errors = 0
    for job, mine, pi in zip(jobs, ours, theirs, strict=True):
        pi_result = json.loads(pi)
        if isinstance(mine, Exception):
            errors += 1
            assert "error" in pi_result, (job, mine)
        else:
            assert "error" not in pi_result, (job, pi_result)
            assert mine == pi, job
    assert errors >= 2  # the cycle files really were refused by both


def test_generated_sessions_are_valid_for_builders():
    rng = random.Random(7)
    header, entries = random_session(rng, 80)
    assert header["version"] == 3 and list(header)[:3] == ["type", "version", "id"]
    assert all(e["type"] in E.ENTRY_TYPES for e in entries)
