"""Live and replay against a real server: one Daphne of its own (the embedded default:
SQLite, the in-memory channel layer, children supervised by the web process), and the shared
distributed deployment (a runs worker and a subagent worker on MariaDB and Redis); websocket
clients and the REST replay. What a live socket received equals the event table, seq without gaps;
a client that reloads mid-batch (a fresh snapshot plus the replay) ends with the same state."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.deployment import Deployment
from tests.support.sockets import Watcher

pytestmark = pytest.mark.slow

LONG = "The workspace holds a few files; here is what each of them is for, in some detail. " * 8


def rules_for(agent: str) -> dict:
    """The agent delegates two looks to itself; each child lists the workspace, then answers at length."""
    return {
        "version": 1, "chunk_size": 6, "delay_ms": 40,
        "rules": [
            {
                "match": "delegate",
                "replies": [
                    [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                        {"agent": agent, "task": "look one"}, {"agent": agent, "task": "look two"}]}}}],
                    [{"text": "Summarized."}],
                ],
            }
        ],
        "default": {"replies": [[{"text": "Let me look first."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": LONG}]]},
    }  # fmt: skip


def policy_for(agent: str) -> dict:
    return {"enabled": True, "agents": [agent], "max_concurrency": 8}


@pytest.fixture(scope="module", params=["embedded", "celery"])
def server(request, tmp_path_factory, distributed):
    """(deployment, agent): an embedded server of this module's own, or the shared distributed
    deployment with an agent of this module's own."""
    if request.param == "embedded":
        deployment = Deployment(tmp_path_factory.mktemp("subagents-live"), rules=rules_for("default"), extra_env={"NETA_SANDBOX": "none"})
        deployment.prepare()
        deployment.set_rules(rules_for("default"), subagent_policy=policy_for("default"))
        with deployment:
            yield deployment, "default"
    else:
        agent = f"live-{uuid.uuid4().hex[:6]}"
        distributed.add_agent(agent, rules_for(agent), subagent_policy=policy_for(agent))
        yield distributed, agent


def replay(cluster: Deployment, run_id: str, *, page: int = 7) -> list[dict]:
    events, after = [], 0
    while True:
        status, body = cluster.http(0, "get", f"/api/subagent-runs/{run_id}/events/?afterSeq={after}&limit={page}")
        assert status == 200, body
        events += body["events"]
        after = body["nextAfterSeq"]
        if not body["hasMore"]:
            return events


def live_by_run(frames: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for frame in frames:
        if frame.get("type") == "subagent_event":
            out.setdefault(frame["subagentRunId"], []).append(frame)
    return out


def same_as_table(frames: list[dict], table: list[dict], *, from_seq: int = 1) -> None:
    """``frames`` cover ``from_seq``..last of ``table`` exactly once, in order, and carry its content
    (a merged ``assistant_delta`` frame: the deltas of its range joined)."""
    by_seq = {e["seq"]: e for e in table}
    assert [e["seq"] for e in table] == list(range(1, len(table) + 1))  # the table has no gap
    covered = []
    for frame in frames:
        covered += range(frame["firstSeq"], frame["seq"] + 1)
        event = frame["event"]
        assert event["seq"] == frame["seq"] and event["type"] == by_seq[frame["seq"]]["type"]
        if event["type"] == "assistant_delta":
            joined = "".join(by_seq[s]["payload"]["delta"] for s in range(frame["firstSeq"], frame["seq"] + 1))
            assert event["delta"] == joined
            assert all(by_seq[s]["type"] == "assistant_delta" for s in range(frame["firstSeq"], frame["seq"] + 1))
        else:
            assert frame["firstSeq"] == frame["seq"] and event == by_seq[frame["seq"]]["payload"]
    assert covered == list(range(from_seq, len(table) + 1))


def test_live_events_equal_the_replay_and_a_reload_mid_batch_ends_in_the_same_state(server):
    server, agent = server

    async def scenario():
        status, session = server.http(0, "post", "/api/sessions/", {"title": "live", "agent": agent})
        assert status == 201, session
        sid = session["sessionId"]
        first = Watcher(server, 0, sid)
        await first.open()
        status, body = await asyncio.to_thread(server.http, 0, "post", f"/api/sessions/{sid}/prompt/", {"text": "please delegate"})
        assert status == 202, body
        run_id = body["run"]["runId"]
        # Mid-batch: both children have streamed something, neither has ended.
        started = []
        for _ in range(2):
            started.append(await first.until(lambda f: f.get("type") == "subagent_run_started" and f not in started))
        child_ids = sorted(f["subagentRunId"] for f in started)
        await first.until(lambda f: f.get("type") == "subagent_event" and f["event"]["type"] == "assistant_delta"
                          and any(g.get("type") == "subagent_event" and g["subagentRunId"] != f["subagentRunId"] for g in first.frames))  # fmt: skip
        assert not any(f.get("type") == "subagent_run_completed" for f in first.frames)
        # The reload: a fresh socket (snapshot), the run list and each child's replay so far.
        second = Watcher(server, 0, sid)
        snapshot = await second.open()
        status, listed = await asyncio.to_thread(server.http, 0, "get", f"/api/sessions/{sid}/subagent-runs/")
        assert status == 200
        so_far = {rid: await asyncio.to_thread(replay, server, rid) for rid in child_ids}
        batch = snapshot["inFlight"]  # the batch entry is the in-flight entry while the children run, the leaf on it
        assert batch["type"] == "subagent_batch" and batch["id"] == started[0]["batchEntryId"] == snapshot["leafId"]
        assert sorted(r["runId"] for r in batch["runs"]) == sorted(r["runId"] for r in listed) == child_ids
        assert all(r["status"] in ("queued", "starting", "running") for r in batch["runs"])
        assert any(so_far.values())
        # The end: every client sees the parent finish.
        for watcher in (first, second):
            await watcher.until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f["state"] == "completed")
        full = {rid: await asyncio.to_thread(replay, server, rid) for rid in child_ids}
        live_first, live_second = live_by_run(first.frames), live_by_run(second.frames)
        for rid in child_ids:
            table = full[rid]
            assert table[0]["type"] == "run_start" and table[-1]["type"] == "run_end"
            same_as_table(live_first[rid], table)  # the live socket got every event, once, in order
            # The reloaded client: its replay, then its socket from where the replay stopped (no gap, no repeat).
            known = len(so_far[rid])
            assert so_far[rid] == table[:known]
            # A frame is published after its events are recorded (one insert), so none straddles the replay.
            assert not [f for f in live_second.get(rid, []) if f["firstSeq"] <= known < f["seq"]]
            later = [f for f in live_second.get(rid, []) if f["firstSeq"] > known]
            same_as_table(later, table, from_seq=known + 1)
            completed = [f for f in first.frames if f.get("type") == "subagent_run_completed" and f["subagentRunId"] == rid]
            assert len(completed) == 1 and completed[0]["eventCount"] == len(table) and completed[0]["status"] == "completed"
        # Both clients agree with REST on the final state of the batch.
        status, listed = await asyncio.to_thread(server.http, 0, "get", f"/api/sessions/{sid}/subagent-runs/")
        assert {r["runId"]: r["status"] for r in listed} == dict.fromkeys(child_ids, "completed")
        if server.backend == "celery":  # the children really ran under the subagent worker
            assert "runtime.supervise_subagent" in server.log("subagents")
        await first.close()
        await second.close()

    asyncio.run(scenario())
