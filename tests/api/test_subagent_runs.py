"""The subagent-run endpoints: what they return, replay pages by seq, cancel, bad input."""

from __future__ import annotations

import pytest

from runtime.models import AgentRun, SubprocessRun
from runtime.subagents.services import subprocess_events_record, subprocess_run_claim, subprocess_runs_create
from tests.support.builders import build_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def subruns(owner, agent):
    tree = build_tree(owner, agent)
    run = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p", status="running")
    rows = subprocess_runs_create(
        parent_run=run, batch_id="batch-1", tool_call_id="call-1", mode="parallel", parent_entry_id=tree.ids["a3"], depth=1,
        tasks=[{"agent": "default", "task": "one"}, {"agent": "default", "task": "two"}],
    )  # fmt: skip
    events = [{"v": 1, "runId": rows[0].run_id.hex, "seq": n, "ts": 1000 + n, "type": "heartbeat", "phase": "model"} for n in range(1, 8)]
    subprocess_events_record(rows[0], events)
    return tree, rows


def test_list_and_detail(client_for, subruns):
    tree, rows = subruns
    client = client_for("owner")
    listed = client.get(f"/api/sessions/{tree.session_id}/subagent-runs/").json()
    assert [r["runId"] for r in listed] == [str(r.run_id) for r in rows]
    assert listed[0]["status"] == "queued" and listed[0]["eventCount"] == 7 and listed[0]["batchId"] == "batch-1"
    detail = client.get(f"/api/subagent-runs/{rows[1].run_id}/").json()
    assert detail["task"] == "two" and detail["finalText"] == "" and detail["taskIndex"] == 1


def test_events_replay_in_bounded_pages_without_gaps(client_for, subruns):
    _, rows = subruns
    client = client_for("owner")
    seen, after = [], 0
    while True:
        page = client.get(f"/api/subagent-runs/{rows[0].run_id}/events/?afterSeq={after}&limit=3").json()
        seen += [e["seq"] for e in page["events"]]
        assert len(page["events"]) <= 3
        after = page["nextAfterSeq"]
        if not page["hasMore"]:
            break
    assert seen == list(range(1, 8))


@pytest.mark.parametrize(
    "query", ["afterSeq=-1", "afterSeq=abc", "afterSeq=1.5", "afterSeq=", "limit=0", "limit=-5", "limit=100000", "limit=x", "after=3", "offset=1"]
)
def test_bad_replay_queries_are_400(client_for, subruns, query):
    _, rows = subruns
    response = client_for("owner").get(f"/api/subagent-runs/{rows[0].run_id}/events/?{query}")
    assert response.status_code == 400 and response.json()["error"]["code"], response.content


@pytest.mark.parametrize("query", ["limit=-5", "limit=0", "limit=501", "limit=abc", "limit=", "offset=-1", "offset=x", "afterSeq=2", "lmit=5"])
def test_bad_run_list_queries_are_400(client_for, subruns, query):
    tree, _ = subruns
    response = client_for("owner").get(f"/api/sessions/{tree.session_id}/subagent-runs/?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"]


def test_run_list_pages_with_limit_and_offset(client_for, subruns):
    tree, rows = subruns
    client = client_for("owner")
    first = client.get(f"/api/sessions/{tree.session_id}/subagent-runs/?limit=1").json()
    second = client.get(f"/api/sessions/{tree.session_id}/subagent-runs/?limit=1&offset=1").json()
    assert [r["runId"] for r in first + second] == [str(r.run_id) for r in rows]
    assert first[0]["parentSubagentRunId"] is None
    assert client.get(f"/api/sessions/{tree.session_id}/subagent-runs/?offset=2").json() == []


def test_unknown_and_malformed_run_ids_are_404(client_for, subruns):
    for run_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        response = client_for("owner").get(f"/api/subagent-runs/{run_id}/")
        assert response.status_code == 404 and response.json()["error"]["code"] == "subagent_run_not_found"


def test_cancel_a_queued_run_never_starts_it_and_says_who(client_for, subruns, owner):
    _, rows = subruns
    body = client_for("owner").post(f"/api/subagent-runs/{rows[0].run_id}/cancel/").json()
    assert body["status"] == "cancelled" and "owner" in body["cancelledBy"]
    assert subprocess_run_claim(rows[0].run_id, max_per_session=8) is None  # a late worker cannot take it
    assert SubprocessRun.objects.get(pk=rows[0].pk).status == "cancelled"


def test_cancel_a_running_run_asks_its_supervisor(client_for, subruns):
    _, rows = subruns
    claimed = subprocess_run_claim(rows[1].run_id, max_per_session=8)
    assert claimed.status == "starting"
    body = client_for("owner").post(f"/api/subagent-runs/{rows[1].run_id}/cancel/").json()
    assert body["status"] == "cancelling" and body["cancelRequested"] is True


def test_another_user_sees_nothing_and_a_read_only_token_cannot_cancel(client_for, subruns):
    _, rows = subruns
    assert client_for("outsider").get(f"/api/subagent-runs/{rows[0].run_id}/events/").status_code == 404
    assert client_for("read_only").get(f"/api/subagent-runs/{rows[0].run_id}/").status_code == 200
    assert client_for("read_only").post(f"/api/subagent-runs/{rows[0].run_id}/cancel/").status_code == 403
    assert SubprocessRun.objects.get(pk=rows[0].pk).status == "queued"
