"""The chat page's view: who gets in, which session it opens, what it embeds."""

from __future__ import annotations

import json
import re

import pytest

from runtime.agents.bootstrap import runtime_bootstrap
from runtime.models import Agent
from runtime.sessions.services import session_start
from sessions_tree.models import AgentSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(sessions_dir, settings, tmp_path):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    runtime_bootstrap()
    return Agent.objects.select_related("model").get(name="default")


def page_data(response) -> dict:
    match = re.search(r'<script id="neta-chat-data" type="application/json">(.*?)</script>', response.content.decode(), re.S)
    return json.loads(match.group(1))


def test_anonymous_users_go_to_the_login_page(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url == "/login/?next=/"
    assert client.get("/login/").status_code == 200


def test_login_page_signs_in_and_rejects_a_wrong_password(client, owner, agent):
    bad = client.post("/login/", {"username": "owner", "password": "nope"})
    assert bad.status_code == 200 and b"correct username and password" in bad.content
    good = client.post("/login/", {"username": "owner", "password": "pw-owner", "next": "/"})
    assert good.status_code == 302 and good.url == "/"


def test_the_agents_last_session_is_restored(client, owner, agent):
    client.force_login(owner)
    first = page_data(client.get("/"))
    second = page_data(client.get("/"))
    assert first["sessionId"] == second["sessionId"]
    assert AgentSession.objects.filter(user=owner).count() == 1
    assert first["agent"]["name"] == "default" and first["agent"]["model"]["contextWindow"] > 0
    assert first["urls"]["socket"] == f"/ws/sessions/{first['sessionId']}/"
    assert [s["sessionId"] for s in first["sessions"]] == [first["sessionId"]]


def test_without_restore_a_visit_starts_a_session_but_leaves_no_empty_ones(client, owner, agent):
    Agent.objects.filter(pk=agent.pk).update(restore_last_session=False)
    client.force_login(owner)
    first = page_data(client.get("/"))["sessionId"]
    # Nothing was written in it: the next visit lands in it again; "New session" (?new=1) is a
    # draft that stores nothing until its first message.
    assert page_data(client.get("/"))["sessionId"] == first
    assert page_data(client.get("/?new=1"))["sessionId"] is None
    assert AgentSession.objects.filter(user=owner).count() == 1
    AgentSession.objects.filter(session_id=first).update(message_count=2)
    second = page_data(client.get("/"))
    assert second["sessionId"] != first
    assert AgentSession.objects.filter(user=owner).count() == 2
    # The list shows sessions with messages (and the open one), never other empty ones.
    assert {s["sessionId"] for s in second["sessions"]} == {first, second["sessionId"]}


def test_new_on_a_restoring_agent_opens_a_fresh_session(client, owner, agent):
    client.force_login(owner)
    first = page_data(client.get("/"))["sessionId"]
    AgentSession.objects.filter(session_id=first).update(message_count=2)
    assert page_data(client.get("/"))["sessionId"] == first
    assert page_data(client.get("/?new=1"))["sessionId"] is None  # a draft: created on its first message


def test_signing_in_without_next_lands_on_the_chat_page(client, owner, agent):
    response = client.post("/login/", {"username": "owner", "password": "pw-owner"})
    assert response.status_code == 302 and response.url == "/"


def test_a_session_page_is_for_its_owner_and_staff_only(client, owner, outsider, staff, agent):
    meta = session_start(agent=agent, user=owner)
    url = f"/sessions/{meta.session_id}/"
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    assert client.get("/sessions/no-such-session/").status_code == 404
    client.force_login(staff)
    assert page_data(client.get(url))["sessionId"] == meta.session_id
    client.force_login(owner)
    response = client.get(url)
    assert response.status_code == 200
    assert "csrftoken" in response.cookies  # the page's API calls need it
    body = response.content.decode()
    assert '<script type="importmap">' in body and "/static/chat/main.js" in body


def test_an_unknown_agent_is_a_404(client, owner, agent):
    client.force_login(owner)
    assert client.get("/?agent=nobody").status_code == 404


def test_the_embedded_data_cannot_break_out_of_its_script(client, owner, agent):
    meta = session_start(agent=agent, user=owner, title="</script><script>alert(1)</script>")
    client.force_login(owner)
    body = client.get(f"/sessions/{meta.session_id}/").content.decode()
    assert "<script>alert(1)" not in body


def test_a_new_session_is_a_draft_that_stores_nothing_until_its_first_message(client, owner, agent):
    from runtime.models import ModelConfig

    client.force_login(owner)
    before = AgentSession.objects.count()
    response = client.get("/?agent=default&new=1")
    assert response.status_code == 200
    data = page_data(response)
    assert data["sessionId"] is None and data["session"] is None and data["urls"]["socket"] is None
    assert data["agent"]["name"] == "default"
    assert AgentSession.objects.count() == before  # nothing left behind by looking
    # The composer's models: enabled, with their key set, the agent's first, with capabilities.
    ModelConfig.objects.create(name="aaa-keyless", provider_kind="anthropic", model_id="x", api_key_env="TEST_NO_SUCH_KEY")
    ModelConfig.objects.create(name="aaa-plain", provider_kind="scripted", model_id="plain", supports_thinking=False)
    names = [m["name"] for m in page_data(client.get("/?new=1"))["models"]]
    assert names[0] == agent.model.name and "aaa-plain" in names and "aaa-keyless" not in names
    plain = next(m for m in page_data(client.get("/?new=1"))["models"] if m["name"] == "aaa-plain")
    assert plain["supportsThinking"] is False and {"supportsImages", "supportsTools", "displayName"} <= set(plain)
    assert client.get("/?agent=nobody&new=1").status_code == 404


def test_a_fresh_session_is_a_new_session_and_an_archived_one_says_so(client, owner, agent):
    client.force_login(owner)
    response = client.get("/")
    data = page_data(response)
    # Nothing written in it yet: "New session", not "Untitled session".
    assert b"<title>New session" in response.content and b"Untitled session" not in response.content
    assert data["session"]["status"] == "active"
    AgentSession.objects.filter(session_id=data["sessionId"]).update(message_count=2)
    assert b"<title>Untitled session" in client.get(f"/sessions/{data['sessionId']}/").content
    AgentSession.objects.filter(session_id=data["sessionId"]).update(status="archived")
    archived = page_data(client.get(f"/sessions/{data['sessionId']}/"))
    assert archived["session"]["status"] == "archived"  # the page offers Restore
