"""Delivery under load, on the real distributed stack: two Daphne servers, a Celery
worker, MariaDB and Redis (``tests/support/deployment.py``), the deployed channel layer
(Redis pub/sub, one bounded queue per socket: docs/realtime.md, "Channel layers").

- 20 sessions × 5 turns, two clients per session (one on each server): every run
  completes (0 failed, 0 left queued or running), every client receives every tree
  event, in revision order without a gap, and its snapshot plus those events equals
  the session fetched afresh; every client receives every run's terminal
  ``run_state``; no socket closes. Each worker process meets one real MariaDB deadlock
  when it first finishes a run (``NETA_TEST_FAULT_AT=finish_deadlock``): the finish is
  retried and that turn completes like the others.
- Per-socket queues of 2 messages with 30 sockets on one server: drops are provoked
  (the server says so), yet no socket dies, heartbeats go on, and the heartbeat makes
  good what was dropped (tree events from the log, the run's state re-sent).
- The layer's Redis connections killed mid-turn (a Redis hiccup): the sockets stay
  open, the turn's events and terminal state still arrive, the next turn streams live.
"""

from __future__ import annotations

import asyncio

import pytest

from sessions_tree.events import TREE_EVENT_TYPES, apply_events
from tests.support.deployment import Deployment
from tests.support.rules import TEST_RULES
from tests.support.services import REDIS_URL, require_mariadb_and_redis
from tests.support.sockets import Watcher

pytestmark = [pytest.mark.slow, pytest.mark.mariadb]

TERMINAL = ("completed", "aborted", "failed", "lost")
HEARTBEAT_SECONDS = 1


def start_cluster(tmp_path_factory, **env) -> Deployment:
    """A deployment of its own: ``env`` (a provoked deadlock, tiny socket queues) is for this test alone."""
    require_mariadb_and_redis()
    cluster = Deployment(
        tmp_path_factory.mktemp("delivery"), servers=2, workers=1, worker_concurrency=2, rules=TEST_RULES,
        database="mysql", redis=True, backend="celery", extra_env={"NETA_WS_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS), **env},
    )  # fmt: skip
    cluster.__enter__()
    return cluster


async def _prompt(cluster: Deployment, server: int, sid: str, text: str) -> str:
    status, body = await asyncio.to_thread(cluster.http, server, "post", f"/api/sessions/{sid}/prompt/", {"text": text})
    assert status == 202, body
    return body["run"]["runId"]


async def _session(cluster: Deployment, index: int, watchers_per_server: int, turns: int, text) -> dict:
    """One session driven through ``turns`` prompts; every watcher must see every run end."""
    status, session = await asyncio.to_thread(cluster.http, index % 2, "post", "/api/sessions/", {"title": f"load {index}"})
    assert status == 201, session
    sid = session["sessionId"]
    watchers = [Watcher(cluster, server, sid) for server in (0, 1) for _ in range(watchers_per_server)]
    before = await watchers[0].open()
    for watcher in watchers[1:]:
        await watcher.open(before["revision"])
    runs = []
    for turn in range(turns):
        run_id = await _prompt(cluster, (index + turn + 1) % 2, sid, text(index, turn))
        runs.append(run_id)
        for watcher in watchers:
            await watcher.until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f["state"] in TERMINAL)
    return {"sid": sid, "before": before, "watchers": watchers, "runs": runs}


async def _check_everything_arrived(cluster: Deployment, result: dict) -> list[str]:
    """Every watcher got every tree event and every run's end; returns the errors of runs
    that did not complete."""
    sid, before, watchers, runs = result["sid"], result["before"], result["watchers"], result["runs"]
    status, after = await asyncio.to_thread(cluster.http, 0, "get", f"/api/sessions/{sid}/snapshot/")
    assert status == 200
    recorded, failed = {}, []
    for run_id in runs:
        status, run = await asyncio.to_thread(cluster.http, 0, "get", f"/api/runs/{run_id}/")
        assert status == 200 and run["status"] in TERMINAL, run
        recorded[run_id] = run["status"]
        if run["status"] != "completed":
            failed.append(run["error"])
    for watcher in watchers:
        await watcher.until(lambda f: f.get("type") in TREE_EVENT_TYPES and f["revision"] >= after["revision"])
        events = watcher.tree_events()
        assert [e["revision"] for e in events] == list(range(before["revision"] + 1, after["revision"] + 1))
        assert apply_events(before, events) == after
        assert watcher.terminal_states() == recorded  # every run's end, as the server recorded it
        assert watcher.closed is None
    return failed


def test_twenty_sessions_five_turns_every_client_gets_every_event(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory, NETA_TEST_FAULT_AT="finish_deadlock")
    try:
        asyncio.run(_load(cluster))
    finally:
        cluster.close()


async def _load(cluster: Deployment) -> None:
    results = await asyncio.gather(*(_session(cluster, i, 1, 5, lambda i, t: f"session {i} turn {t}") for i in range(20)))
    failed = [error for result in results for error in await _check_everything_arrived(cluster, result)]
    assert failed == []
    # Nothing left behind: every run of the cluster is terminal (0 stuck), all 100 completed.
    status, body = await asyncio.to_thread(cluster.http, 0, "get", "/api/runs/?limit=200")
    assert status == 200, body
    runs = body["results"] if isinstance(body, dict) else body
    assert len(runs) == 100 and {r["status"] for r in runs} == {"completed"}, [r for r in runs if r["status"] != "completed"][:3]
    # The provoked deadlock happened in the worker and its finish was retried (1213).
    log = cluster.log("worker0")
    assert "provoking a deadlock" in log, log[-3000:]
    assert any("retrying the transaction" in line and "1213" in line and ("finishing run" in line or "the next input of run" in line) for line in log.splitlines()), log[-3000:]
    # Streamed text reached the clients live (not only through the heartbeat's repairs).
    assert all(any(w.count("assistant_stream_delta") for w in r["watchers"]) for r in results)
    for result in results:
        for watcher in result["watchers"]:
            await watcher.close()


def test_full_socket_queues_and_a_redis_hiccup_lose_nothing_for_good(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory, NETA_WS_CHANNEL_CAPACITY="2")
    try:
        asyncio.run(_small_capacity_and_hiccup(cluster))
    finally:
        cluster.close()


def _kill_layer_connections(cluster: Deployment) -> int:
    """Close every Redis connection of this cluster's channel layer (named after its prefix)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    name = f"{cluster.name}-channels"
    killed = 0
    for info in client.client_list():
        if info.get("name") == name:
            killed += client.client_kill_filter(_id=info["id"])
    return killed


async def _small_capacity_and_hiccup(cluster: Deployment) -> None:
    # 3 sessions, 5 sockets each on each server: 15 on each Daphne, queues of 2 messages;
    # each turn streams slowly (many deltas), so queues overflow.
    results = await asyncio.gather(*(_session(cluster, i, 5, 3, lambda i, t: f"please answer slowly {i}.{t}") for i in range(3)))
    logs = cluster.log("daphne0") + cluster.log("daphne1")
    assert "dropped from full socket queues" in logs  # the provocation happened
    for result in results:
        await _check_everything_arrived(cluster, result)
    # Heartbeats went on on every socket, after the drops too.
    marks = {id(w): w.count("heartbeat") for r in results for w in r["watchers"]}
    try:
        # A new heartbeat on every socket (a wait, not a measure: a busy machine may take many periods).
        async with asyncio.timeout(HEARTBEAT_SECONDS * 30):
            while not all(w.count("heartbeat") > marks[id(w)] for r in results for w in r["watchers"]):
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError("a socket got no heartbeat for 30 heartbeat periods after the drops") from None

    # A Redis hiccup in the middle of a turn: every connection of the layer is killed.
    first = results[0]
    sid, watchers = first["sid"], first["watchers"]
    run_id = await _prompt(cluster, 1, sid, "please answer slowly, again")
    await watchers[0].until(lambda f: f.get("type") == "assistant_stream_delta")
    assert _kill_layer_connections(cluster) >= 3  # two servers and the worker at least
    first["runs"].append(run_id)
    for watcher in watchers:
        await watcher.until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f["state"] in TERMINAL)
    # The layer came back by itself: the next turn streams live to every socket.
    marks = {id(w): w.count("assistant_stream_delta") for w in watchers}
    run_id = await _prompt(cluster, 0, sid, "after the hiccup, please answer slowly")
    first["runs"].append(run_id)
    for watcher in watchers:
        await watcher.until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f["state"] in TERMINAL)
    await _check_everything_arrived(cluster, first)
    assert all(w.count("assistant_stream_delta") > marks[id(w)] for w in watchers)
    for result in results:
        for watcher in result["watchers"]:
            assert watcher.closed is None
            await watcher.close()
