"""Crash safety of the file provider: writers killed with SIGKILL at random moments.

A child process (``appender.py``) appends entries of mixed types and sizes (up to
a few hundred KB) and prints each acknowledged id; the test kills it with
SIGKILL and then checks, on the file as it is left and with no in-process cache:

- no acknowledged entry is lost, and acknowledged entries keep their order;
- every complete line of the file is one JSON value (no glued lines); at most
  the last, unterminated line is torn;
- Neta's reading (file provider), Pi's reading (``parse_session_text``) and a
  new process agree on the entries and the context;
- the next append works, repairs the torn tail (keeping it aside in the
  diagnostics) and leaves a file whose every line parses;
- the meta row is right: counters, leaf, and the event log replays to the
  current snapshot.

The children are forked from a server process (``appender.py serve``) that has
done the slow Python/Django start-up once; each child is still a new process
that starts from what is stored.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from django.conf import settings

from sessions_tree import tree_events
from sessions_tree.context import build_session_context
from sessions_tree.errors import EntryNotFound
from sessions_tree.events import apply_events
from sessions_tree.jsonl import parse_session_text
from sessions_tree.providers import get_provider
from tests.support.services import REPO
from tests.support.entries import appender_env, forget_process_caches, user_message

pytestmark = pytest.mark.django_db(transaction=True)

APPENDER = Path(__file__).with_name("appender.py")
RANDOM_RUNS = 50  # at least 50 random kills a run
SESSIONS = 10


class ForkServer:
    """``appender.py serve``: forks one fresh child per command."""

    def __init__(self, workdir: Path):
        env = appender_env(settings)
        self.workdir = workdir
        self.stderr_path = workdir / "appender.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(APPENDER), "serve"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    def _call(self, **command) -> dict:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the fork server died: {self.stderr()}"
        return json.loads(line)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def start_appender(self, session_id: str, seed: int, acks: Path, crash: str | None = None) -> int:
        return self._call(cmd="append", session=session_id, seed=seed, acks=str(acks), crash=crash)["pid"]

    def reap(self, pid: int) -> dict:
        return self._call(cmd="reap", pid=pid)

    def read_in_new_process(self, session_id: str) -> dict:
        out = self.workdir / f"verify-{session_id}.json"
        reply = self._call(cmd="verify", session=session_id, out=str(out))
        assert reply["exit"] == 0, f"a new process could not read session {session_id}: {self.stderr()}"
        return json.loads(out.read_text())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def _server(django_db_setup, tmp_path_factory):
    server = ForkServer(tmp_path_factory.mktemp("fork-server"))
    yield server
    server.close()


@pytest.fixture
def fork_server(_server, sessions_dir, settings):
    settings.NETA_EVENT_LOG_SIZE = 100_000
    settings.NETA_SNAPSHOT_ENTRY_LIMIT = 100_000
    return _server


@dataclass
class Tracked:
    """What the test knows about one session: what was acknowledged, and its first snapshot."""

    session_id: str
    first_snapshot: dict
    acked: list[str] = field(default_factory=list)
    begun: list[str] = field(default_factory=list)


def read_acks(path: Path) -> tuple[list[str], list[str]]:
    """(acknowledged ids, ids that went in flight) from a child's output; a cut last line is ignored."""
    acked, begun = [], []
    if not path.exists():
        return acked, begun
    data = path.read_bytes()
    for line in data.split(b"\n")[:-1]:  # only lines the child finished writing
        kind, _, entry_id = line.decode().partition(" ")
        (begun if kind == "F" else acked).append(entry_id)
    return acked, begun


def file_state(path: str, data: bytes | None = None) -> tuple[list[dict], bytes]:
    """(the JSON objects of the complete lines, the unterminated tail) — asserting no glued line.
    ``data``: the file's bytes, when the caller has read them."""
    if data is None:
        data = Path(path).read_bytes()
    *complete, tail = data.split(b"\n")
    objects = []
    for number, line in enumerate(complete, start=1):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            pytest.fail(f"line {number} of {path} is not one JSON value (glued or damaged): {exc}: {line[:120]!r}")
        assert isinstance(value, dict), f"line {number} is not an object"
        objects.append(value)
    assert objects and objects[0]["type"] == "session", "the header is gone"
    return objects, tail


def tail_is_entry(tail: bytes) -> bool:
    try:
        value = orjson.loads(tail)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and isinstance(value.get("id"), str)


def in_order(subsequence: list[str], sequence: list[str]) -> bool:
    position = {value: i for i, value in enumerate(sequence)}
    indices = [position.get(value, -1) for value in subsequence]
    return -1 not in indices and indices == sorted(indices)


def pi_parse(data: bytes):
    parsed = parse_session_text(data.decode("utf-8", errors="replace"))  # as Node reads it
    assert parsed.header is not None
    assert [d.kind for d in parsed.diagnostics] in ([], ["torn_tail"])
    return parsed


def pi_reading(path: str) -> list[str]:
    return [e["id"] for e in pi_parse(Path(path).read_bytes()).entries]


@dataclass
class AfterKill:
    """The file as the kill left it: its bytes, its torn tail, and Pi's reading of it."""

    data: bytes
    tail: bytes
    pi_ids: list[str]


def check_after_kill(provider, server: ForkServer, tracked: Tracked) -> AfterKill:
    """Everything that must hold on the file exactly as the kill left it."""
    meta = provider.get_session(tracked.session_id)
    data = Path(meta.session_file).read_bytes()
    objects, tail = file_state(meta.session_file, data)
    file_ids = [o["id"] for o in objects[1:]]
    assert len(file_ids) == len(set(file_ids)), "duplicate entry ids in the file"
    stored = set(file_ids)
    missing = [i for i in tracked.acked if i not in stored]
    assert not missing, f"acknowledged entries lost: {missing}"
    assert in_order(tracked.acked, file_ids), "acknowledged entries out of order"
    for entry_id in tracked.begun:  # in flight when killed (kept in the meta row) or stored
        assert entry_id in file_ids or entry_id == meta.in_flight_entry_id

    # Pi's reading of the same bytes: the complete lines, plus a tail that happens to be a whole object.
    parsed = pi_parse(data)
    pi_ids = [e["id"] for e in parsed.entries]
    assert pi_ids == file_ids + ([orjson.loads(tail)["id"]] if tail and tail_is_entry(tail) else [])

    # Neta's reading, with no in-process cache, and a new process: what was acknowledged
    # (Pi's reading less at most the one line a writer died on before its commit, which
    # the next write adopts).
    forget_process_caches()
    neta_ids = [e["id"] for e in provider.list_entries(tracked.session_id)]
    assert pi_ids[: len(neta_ids)] == neta_ids
    unacknowledged = pi_ids[len(neta_ids) :]
    assert len(unacknowledged) <= 1 and not set(unacknowledged) & set(tracked.acked)
    ctx = provider.build_context(tracked.session_id)
    meta = provider.get_session(tracked.session_id)
    if meta.in_flight_entry_id is None:
        pi_ctx = build_session_context(parsed.entries, meta.leaf_entry_id)
        assert ctx.source_entry_ids == pi_ctx.source_entry_ids
        assert ctx.messages == pi_ctx.messages
    fresh = server.read_in_new_process(tracked.session_id)
    assert fresh["entryIds"] == neta_ids
    assert fresh["leaf"] == meta.leaf_entry_id and fresh["inFlight"] == meta.in_flight_entry_id
    assert fresh["contextIds"] == ctx.source_entry_ids
    return AfterKill(data, tail, pi_ids)


def check_next_append(provider, tracked: Tracked, left: AfterKill) -> None:
    """The next append (after finalizing what a dead writer left in flight) works, repairs
    the tail and adopts what a dead writer left durable; then Neta and Pi read the same.
    ``left``: ``check_after_kill``'s reading of the file, unchanged since (checked)."""
    sid = tracked.session_id
    tail = left.tail
    forget_process_caches()
    meta = provider.get_session(sid)
    assert Path(meta.session_file).read_bytes() == left.data, "the file changed after the checks of the kill"
    pi_before = left.pi_ids
    torn_before = len(meta.diagnostics.get("tornTails", []))
    recovered = []
    if meta.in_flight_entry_id:
        try:
            recovered.append(provider.finalize_in_flight(sid, meta.in_flight_entry_id, status="aborted")["id"])
        except EntryNotFound:
            # The dead writer had made the finalized line durable: the recovery adopted it.
            assert meta.in_flight_entry_id in pi_before
            assert provider.get_session(sid).in_flight_entry_id is None
    new = provider.append_message(sid, user_message("after the crash"))
    tracked.acked += [*recovered, new["id"]]

    meta = provider.get_session(sid)
    objects, new_tail = file_state(meta.session_file)
    assert new_tail == b"", "the file does not end with a newline after an append"
    file_ids = [o["id"] for o in objects[1:]]
    assert file_ids == pi_before + recovered + [new["id"]]
    assert file_ids == [e["id"] for e in provider.list_entries(sid)]
    assert pi_reading(meta.session_file) == file_ids
    assert meta.leaf_entry_id == new["id"]
    assert in_order(tracked.acked, file_ids) and len(file_ids) == len(set(file_ids))
    torn = meta.diagnostics.get("tornTails", [])
    if tail and not tail_is_entry(tail):  # a fragment is cut off and kept aside, never silently dropped
        assert len(torn) == torn_before + 1
        kept = base64.b64decode(torn[-1]["fragmentBase64"])
        assert torn[-1]["length"] == len(tail) and tail.startswith(kept) and kept
    else:
        assert len(torn) == torn_before
    check_meta(provider, tracked, file_ids)


def check_meta(provider, tracked: Tracked, file_ids: list[str]) -> None:
    """Counters match the file, and the event log replays to the current snapshot."""
    sid = tracked.session_id
    meta = provider.get_session(sid)
    entries = provider.list_entries(sid)
    assert meta.entry_count == len(file_ids) == len(entries)
    assert meta.message_count == sum(1 for e in entries if e["type"] == "message")
    assert meta.label_count == sum(1 for e in entries if e["type"] == "label")
    parents = {e["parentId"] for e in entries}
    assert meta.tip_count == sum(1 for e in entries if e["id"] not in parents)
    events = provider.events_since(sid, 0)
    assert [e["revision"] for e in events] == list(range(1, meta.revision + 1))
    assert apply_events(tracked.first_snapshot, events) == provider.get_snapshot(sid)
    # Adopted lines (``recovered``) too have exactly their declared keys.
    assert [tree_events.shape_errors(e) for e in events] == [[] for _ in events]


def kill_at_random(server: ForkServer, tracked: Tracked, rng: random.Random, acks: Path) -> None:
    pid = server.start_appender(tracked.session_id, rng.randrange(1 << 30), acks)
    # An append takes a few milliseconds, so any moment within tens of them lands anywhere
    # in one; a longer life only makes a longer file for every later check to read.
    time.sleep(rng.choice([0.0, 0.01, 0.05]) + rng.random() * 0.15)
    os.kill(pid, signal.SIGKILL)
    status = server.reap(pid)
    assert status["signal"] == signal.SIGKILL, f"the appender ended on its own: {status} {server.stderr()}"


def new_tracked(provider) -> Tracked:
    meta = provider.create_session(cwd="/crash/test")
    return Tracked(meta.session_id, provider.get_snapshot(meta.session_id))


@pytest.mark.slow
def test_random_sigkill_never_loses_acknowledged_entries(fork_server, tmp_path):
    provider = get_provider("file")
    seed = int(os.environ.get("NETA_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    sessions = [new_tracked(provider) for _ in range(SESSIONS)]
    torn_tails = 0
    for run in range(RANDOM_RUNS):
        tracked = sessions[run % SESSIONS]
        acks = tmp_path / f"acks-{run}.txt"
        kill_at_random(fork_server, tracked, rng, acks)
        acked, begun = read_acks(acks)
        tracked.acked += acked
        tracked.begun = begun
        left = check_after_kill(provider, fork_server, tracked)
        torn_tails += bool(left.tail)
        # Half the time the test appends next; otherwise the next child meets the
        # file as the kill left it (torn tail, entry in flight) and must cope.
        if run % 2 == 0:
            check_next_append(provider, tracked, left)
    for tracked in sessions:
        left = check_after_kill(provider, fork_server, tracked)
        check_next_append(provider, tracked, left)
    total = sum(len(t.acked) for t in sessions)
    print(f"crash test (NETA_CRASH_SEED={seed}): {RANDOM_RUNS} kills, {total} acknowledged entries, {torn_tails} torn tails")
    assert total > RANDOM_RUNS, "the children acknowledged almost nothing: the kills proved little"


@pytest.mark.parametrize("crash", ["mid-write:1", "mid-write:4", "mid-write:9", "torn-newline:1", "torn-newline:3", "after-sync:1", "after-sync:5"])
def test_kill_at_a_chosen_point_of_an_append(fork_server, tmp_path, crash):
    """Deterministic kills where random ones rarely land: inside the write, and after
    the line is durable but before the meta row is committed."""
    provider = get_provider("file")
    for seed in range(4):
        tracked = new_tracked(provider)
        acks = tmp_path / f"acks-{seed}.txt"
        pid = fork_server.start_appender(tracked.session_id, seed, acks, crash=crash)
        status = fork_server.reap(pid)
        assert status["signal"] == signal.SIGKILL, f"{status} {fork_server.stderr()}"
        tracked.acked, tracked.begun = read_acks(acks)
        left = check_after_kill(provider, fork_server, tracked)
        tail = left.tail
        if crash.startswith("torn-newline"):
            assert tail_is_entry(tail), "all of the line but its newline reached the file"
        elif crash.startswith("mid-write"):
            assert tail, "a kill inside the write leaves an unterminated line"
        else:
            assert not tail
            # The line reached the disk although the append was never acknowledged.
            objects, _ = file_state(provider.get_session(tracked.session_id).session_file)
            assert len(objects) - 1 == len(tracked.acked) + 1
        if seed % 2:  # a new writer process meets the damage first
            pid = fork_server.start_appender(tracked.session_id, 100 + seed, acks)
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            fork_server.reap(pid)
            tracked.acked, begun = read_acks(acks)
            tracked.begun = begun
            left = check_after_kill(provider, fork_server, tracked)
        check_next_append(provider, tracked, left)
