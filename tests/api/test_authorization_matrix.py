"""Who gets in: every endpoint × anonymous, owner, another user, staff roles
(a superuser; staff holding view, change, view+delete or no session permission),
read-only token, revoked token and an expired one → the expected status.

Each actor acts on a fresh session owned by ``owner``, so a write that should
have been refused would show up as a changed session. The rule itself:
runtime/sessions/access.py (docs/api.md, "Access").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runtime.models import AgentRun
from runtime.subagents.services import subprocess_runs_create
from sessions_tree.models import AgentSession
from tests.support.builders import build_tree
from tests.support.roles import ROLE_PERMS, role_user
from tests.support.services import FIXTURES

ROLES = ("superuser", *ROLE_PERMS)
ACTORS = ("anonymous", "owner", "outsider", *ROLES, "read_only", "revoked", "expired")


@dataclass
class Endpoint:
    method: str
    path: str  # {sid}, {u1}, {a1}, {run} are filled in
    ok: int  # the owner's status
    body: dict | None = None
    session_scoped: bool = True
    upload: bool = False
    write: bool = field(init=False)

    def __post_init__(self):
        self.write = self.method not in ("get", "head", "options")

    def expected(self, actor: str) -> int:
        if actor in ("anonymous", "revoked", "expired"):
            return 401
        if actor == "read_only" and self.write:
            return 403
        if not self.session_scoped or actor in ("owner", "superuser", "read_only"):
            return self.ok
        # Another user's session: 404 unless they may read it, 403 unless they may do this.
        perms = {"outsider": (), **ROLE_PERMS}[actor]
        if not {"view_agentsession", "change_agentsession"} & set(perms):
            return 404
        if self.method == "delete":
            return self.ok if "delete_agentsession" in perms else 403
        if self.write:
            return self.ok if "change_agentsession" in perms else 403
        return self.ok

    def __str__(self):
        return f"{self.method.upper()} {self.path}"


ENDPOINTS = [
    Endpoint("get", "/api/sessions/{sid}/", 200),
    Endpoint("patch", "/api/sessions/{sid}/", 200, {"status": "archived"}),
    Endpoint("delete", "/api/sessions/{sid}/", 204),
    Endpoint("get", "/api/sessions/{sid}/snapshot/", 200),
    Endpoint("get", "/api/sessions/{sid}/entries/", 200),
    Endpoint("get", "/api/sessions/{sid}/events/?sinceRevision=0", 200),
    Endpoint("post", "/api/sessions/{sid}/prompt/", 202, {"text": "hello"}),
    Endpoint("post", "/api/sessions/{sid}/regenerate/", 202, {"entryId": "{u1}"}),
    Endpoint("post", "/api/sessions/{sid}/abort/", 200),
    Endpoint("post", "/api/sessions/{sid}/switch-leaf/", 200, {"entryId": "{a1}", "summarize": False}),
    Endpoint("post", "/api/sessions/{sid}/labels/", 201, {"entryId": "{u1}", "label": "here"}),
    Endpoint("post", "/api/sessions/{sid}/compact/", 201, {}),
    Endpoint("post", "/api/sessions/{sid}/fork/", 201, {"entryId": "{a1}"}),
    Endpoint("get", "/api/sessions/{sid}/export/", 200),
    Endpoint("get", "/api/runs/{run}/", 200),
    Endpoint("get", "/api/sessions/{sid}/subagent-runs/", 200),
    Endpoint("get", "/api/subagent-runs/{subrun}/", 200),
    Endpoint("get", "/api/subagent-runs/{subrun}/events/?afterSeq=0", 200),
    Endpoint("post", "/api/subagent-runs/{subrun}/cancel/", 200),
    Endpoint("get", "/api/sessions/", 200, session_scoped=False),
    Endpoint("get", "/api/sessions/search/?q=question", 200, session_scoped=False),
    Endpoint("post", "/api/sessions/", 201, {"title": "new"}, session_scoped=False),
    Endpoint("post", "/api/sessions/import/", 201, session_scoped=False, upload=True),
    Endpoint("get", "/api/agents/", 200, session_scoped=False),
    Endpoint("get", "/api/agents/default/", 200, session_scoped=False),
    Endpoint("get", "/api/agents/default/tools/", 200, session_scoped=False),
    Endpoint("get", "/api/models/", 200, session_scoped=False),
    Endpoint("get", "/api/models/scripted-demo/", 200, session_scoped=False),
    Endpoint("get", "/api/skills/", 200, session_scoped=False),
    Endpoint("get", "/api/runs/", 200, session_scoped=False),
    Endpoint("get", "/api/me/", 200, session_scoped=False),
]


def _fill(value, names: dict):
    if isinstance(value, str):
        for key, replacement in names.items():
            value = value.replace("{" + key + "}", replacement)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def pi_file_with_new_id():
    """A Pi fixture file under a fresh session id (each actor imports its own)."""
    import io
    import json

    from sessions_tree.ids import new_session_id

    lines = (FIXTURES / "01-linear.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["id"] = new_session_id()
    upload = io.BytesIO("\n".join([json.dumps(header), *lines[1:]]).encode() + b"\n")
    upload.name = "linear.jsonl"
    return upload


def _compactable_tree(owner, agent):
    """A tree long enough for a manual compaction to have something to summarize."""
    agent.compaction_keep_recent_tokens = 1
    agent.save()
    return build_tree(owner, agent)


@pytest.fixture
def client_as(client_for, db):
    """``client_for`` plus the staff roles."""
    from rest_framework.test import APIClient

    users = {}

    def make(actor: str):
        if actor not in ROLES:
            return client_for(actor)
        if actor not in users:
            users[actor] = role_user(actor)
        client = APIClient()
        client.force_login(users[actor])
        return client

    return make


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_every_endpoint_for_every_actor(endpoint, client_as, owner, agent):
    client_for = client_as
    shared = None
    for actor in ACTORS:
        if endpoint.write or shared is None:  # reads share one session; writes get a fresh one each
            tree = _compactable_tree(owner, agent) if "compact" in endpoint.path else build_tree(owner, agent)
            run = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p", status="completed")
            subrun = subprocess_runs_create(
                parent_run=run, batch_id="b", tool_call_id="c", mode="single", parent_entry_id="", depth=1,
                tasks=[{"agent": agent.name, "task": "t"}],
            )[0]  # fmt: skip
            shared = (tree, run, subrun)
        tree, run, subrun = shared
        names = {"sid": tree.session_id, "run": str(run.run_id), "subrun": str(subrun.run_id), **tree.ids}
        path = _fill(endpoint.path, names)
        client = client_for(actor)
        revision = AgentSession.objects.get(session_id=tree.session_id).revision
        if endpoint.upload:
            response = client.post(path, {"file": pi_file_with_new_id()}, format="multipart")
        else:
            response = getattr(client, endpoint.method)(path, _fill(endpoint.body, names))
        expected = endpoint.expected(actor)
        assert response.status_code == expected, f"{endpoint} as {actor}: {response.status_code} {response.content[:300]!r}"
        if response.status_code >= 400:
            assert response.json()["error"]["code"]
            if endpoint.session_scoped and endpoint.write:
                # Refused: the session did not change.
                assert AgentSession.objects.get(session_id=tree.session_id).revision == revision
        if response.status_code == 401:
            assert response["WWW-Authenticate"] == "Token"


def test_lists_show_other_users_sessions_and_runs_only_to_who_may_read_them(client_as, owner, agent):
    tree = build_tree(owner, agent)
    run = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p", status="completed")
    for actor in ("outsider", *ROLES):
        client = client_as(actor)
        sees = actor == "superuser" or bool({"view_agentsession", "change_agentsession"} & set(ROLE_PERMS.get(actor, ())))
        sessions = [s["sessionId"] for s in client.get("/api/sessions/").json()["results"]]
        runs = [r["runId"] for r in client.get("/api/runs/").json()["results"]]
        filtered = [r["runId"] for r in client.get(f"/api/runs/?session={tree.session_id}").json()["results"]]
        assert (tree.session_id in sessions) is sees, actor
        assert (str(run.run_id) in runs) is sees, actor
        assert (str(run.run_id) in filtered) is sees, actor


def test_an_inactive_user_is_refused_everywhere(client_as, owner, agent):
    tree = build_tree(owner, agent)
    client = client_as("owner")
    owner.is_active = False
    owner.save()
    assert client.get(f"/api/sessions/{tree.session_id}/").status_code in (401, 403)


@pytest.mark.parametrize("actor", ["owner", "outsider", *ROLES])
def test_the_chat_page_follows_the_same_rule(actor, client_as, owner, agent):
    """The page of another user's session: 404 unless the viewer may read it; read-only
    (the page data says so) unless they may change it."""
    import json
    import re

    tree = build_tree(owner, agent)
    client = client_as(actor)
    response = client.get(f"/sessions/{tree.session_id}/")
    perms = set(ROLE_PERMS.get(actor, ()))
    reads = actor in ("owner", "superuser") or bool({"view_agentsession", "change_agentsession"} & perms)
    writes = actor in ("owner", "superuser") or "change_agentsession" in perms
    if not reads:
        assert response.status_code == 404
        return
    assert response.status_code == 200
    match = re.search(r'<script id="neta-chat-data" type="application/json">(.*?)</script>', response.content.decode(), re.S)
    assert match, "the page embeds its data"
    assert json.loads(match.group(1))["readOnly"] is (not writes)
