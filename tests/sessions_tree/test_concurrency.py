"""Many writers, one session: nothing lost, nothing duplicated, one chain.

- file provider: 8 processes x 500 appends to one session file (``flock``
  serializes them across processes);
- mysql provider on the real MariaDB: 16 threads x 200 appends, each thread on
  its own connection, all sharing the process's session index (as the threads
  of a web process do).

Every append continues from the leaf the previous one left, so the entries must
form one chain in stored order, the leaf must be the last entry, the revision
must equal the number of appends, the counters must be right, every writer's
entries must appear in its own order, and the event log must replay to the
final snapshot.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import close_old_connections, connections

from sessions_tree.events import apply_events
from sessions_tree.jsonl import parse_session_text
from sessions_tree.providers import get_provider
from tests.support.services import REPO
from tests.support.entries import appender_env, forget_process_caches

APPENDER = Path(__file__).with_name("appender.py")


def check_one_chain(provider, session_id: str, first_snapshot: dict, acknowledged: dict[str, list[str]], writers: int, per_writer: int) -> None:
    total = writers * per_writer
    forget_process_caches()
    entries = provider.list_entries(session_id)
    ids = [e["id"] for e in entries]
    assert len(entries) == total, f"{total - len(entries)} appends lost"
    assert len(set(ids)) == total, "duplicate entry ids"
    assert sorted(ids) == sorted(i for acks in acknowledged.values() for i in acks), "stored != acknowledged"
    # One chain: every entry continues from the one stored before it.
    assert entries[0]["parentId"] is None
    broken = [i for i in range(1, total) if entries[i]["parentId"] != ids[i - 1]]
    assert not broken, f"{len(broken)} entries do not continue the chain (first at {broken[0]})"
    # Each writer's entries in the writer's own order.
    position = {entry_id: n for n, entry_id in enumerate(ids)}
    for tag, acks in acknowledged.items():
        assert len(acks) == per_writer, f"writer {tag} acknowledged {len(acks)}"
        assert [position[i] for i in acks] == sorted(position[i] for i in acks)
        texts = [entries[position[i]]["message"]["content"][0]["text"] for i in acks]
        assert texts == [f"{tag}-{n}" for n in range(per_writer)]

    meta = provider.get_session(session_id)
    assert meta.leaf_entry_id == ids[-1] and meta.root_entry_id == ids[0]
    assert meta.revision == total
    assert (meta.entry_count, meta.message_count, meta.tip_count) == (total, total, 1)
    assert provider.build_context(session_id).source_entry_ids == ids
    events = provider.events_since(session_id, 0)
    assert [e["revision"] for e in events] == list(range(1, total + 1))
    assert apply_events(first_snapshot, events) == provider.get_snapshot(session_id)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_eight_processes_append_to_one_file_session(sessions_dir, settings):
    writers, per_writer = 8, 500
    settings.NETA_EVENT_LOG_SIZE = 100_000
    settings.NETA_SNAPSHOT_ENTRY_LIMIT = 100_000
    provider = get_provider("file")
    meta = provider.create_session(cwd="/concurrency")
    first = provider.get_snapshot(meta.session_id)
    env = appender_env(settings)
    procs = {}
    for n in range(writers):
        tag = f"p{n}"
        procs[tag] = subprocess.Popen(
            [sys.executable, str(APPENDER), "burst", meta.session_id, str(per_writer), tag],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        for tag, proc in procs.items():
            assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        for proc in procs.values():  # all start at once
            proc.stdin.write("go\n")
            proc.stdin.flush()
        acknowledged = {}
        for tag, proc in procs.items():
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
            acknowledged[tag] = [line.split(" ", 1)[1] for line in out.splitlines()]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    check_one_chain(provider, meta.session_id, first, acknowledged, writers, per_writer)
    # The file itself: one whole line per entry, as Pi reads it.
    data = Path(provider.get_session(meta.session_id).session_file).read_text(encoding="utf-8")
    parsed = parse_session_text(data)
    assert parsed.diagnostics == [] and len(parsed.entries) == writers * per_writer
    assert data.endswith("\n") and data.count("\n") == writers * per_writer + 1


@pytest.mark.slow
@pytest.mark.django_db(databases=["default", "mysql"], transaction=True)
def test_sixteen_threads_append_to_one_mysql_session_on_mariadb(mysql_alias, settings):
    writers, per_writer = 16, 200
    settings.NETA_EVENT_LOG_SIZE = 100_000
    settings.NETA_SNAPSHOT_ENTRY_LIMIT = 100_000
    assert connections[mysql_alias].vendor == "mysql"
    provider = get_provider("mysql", using=mysql_alias)
    meta = provider.create_session(cwd="/concurrency")
    first = provider.get_snapshot(meta.session_id)
    acknowledged: dict[str, list[str]] = {f"t{n}": [] for n in range(writers)}
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def writer(tag: str) -> None:
        try:
            start.wait()
            for i in range(per_writer):
                message = {"role": "user", "content": [{"type": "text", "text": f"{tag}-{i}"}], "timestamp": i}
                acknowledged[tag].append(provider.append_message(meta.session_id, message)["id"])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections[mysql_alias].close()  # each thread had its own connection

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in acknowledged]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, repr(errors[:3])
    close_old_connections()
    check_one_chain(provider, meta.session_id, first, acknowledged, writers, per_writer)
