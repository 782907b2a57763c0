"""Who may use an agent: everyone by default; restricted, only the users and the
groups' members named — the agent is absent from everyone else's lists (API and chat page),
creating a session with it is refused as an unknown agent, prompting their own old session
with it is 403, the chat page answers 404 / 403. And tokens over the API: rotate and revoke."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from audit.models import AuditEntry
from runtime.agents.services import agent_set_access
from runtime.api.tokens import TokenInvalid, api_token_authenticate, api_token_create
from runtime.models import ApiToken

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def names(client) -> list[str]:
    return [a["name"] for a in client.get("/api/agents/").json()["results"]]


def test_by_default_everyone_may_use_every_enabled_agent(agent, owner, outsider):
    assert names(api(owner)) == names(api(outsider)) == ["default"]
    assert api(outsider).post("/api/sessions/", {}, format="json").status_code == 201


def test_a_restricted_agent_is_only_for_its_users_and_groups(agent, owner, outsider, staff, client):
    tree = api(owner).post("/api/sessions/", {}, format="json").json()  # made while it was open to all
    team = Group.objects.create(name="team")
    agent_set_access(agent_id=agent.pk, actor=staff, restricted=True, users=[], groups=[team])

    for user in (owner, outsider):
        assert names(api(user)) == []
        assert api(user).get("/api/agents/default/").status_code == 404
        assert api(user).get("/api/agents/default/tools/").status_code == 404
        refused = api(user).post("/api/sessions/", {"agent": "default"}, format="json")
        assert refused.status_code == 400 and refused.json()["error"]["fields"] == {"agent": ["no enabled agent named 'default'"]}
    prompt = api(owner).post(f"/api/sessions/{tree['sessionId']}/prompt/", {"text": "hi"}, format="json")
    assert prompt.status_code == 403 and prompt.json()["error"]["code"] == "permission_denied"
    assert api(owner).get(f"/api/sessions/{tree['sessionId']}/").status_code == 200  # their history stays readable
    assert names(api(staff)) == ["default"]  # staff (a superuser here) still manage it

    client.force_login(outsider)
    assert client.get("/?agent=default").status_code == 404
    assert client.get("/").status_code == 403  # no agent left for them
    client.force_login(owner)
    assert client.get(f"/sessions/{tree['sessionId']}/").status_code == 403

    owner.groups.add(team)  # a member of the group now
    assert names(api(owner)) == ["default"]
    assert api(owner).post(f"/api/sessions/{tree['sessionId']}/prompt/", {"text": "hi"}, format="json").status_code == 202
    assert client.get(f"/sessions/{tree['sessionId']}/").status_code == 200
    agent_set_access(agent_id=agent.pk, actor=staff, restricted=True, users=[outsider], groups=[])
    assert names(api(outsider)) == ["default"] and names(api(owner)) == []
    row = AuditEntry.objects.filter(action="agent.set_access").order_by("id").last()
    assert row.before == {"allowed_users": [], "allowed_groups": ["team"]}
    assert row.after == {"allowed_users": ["outsider"], "allowed_groups": []}


def test_the_console_access_page_saves_through_the_service(agent, outsider, staff, client):
    client.force_login(staff)
    url = f"/admin/runtime/agent/{agent.pk}/access/"
    assert client.get(url).status_code == 200
    assert client.post(url, {"restricted": "on", "users": [outsider.pk]}).status_code == 302
    agent.refresh_from_db()
    assert agent.access_restricted and list(agent.allowed_users.all()) == [outsider]
    listing = client.get("/admin/runtime/agent/").content.decode()
    assert "1 user(s), 0 group(s)" in listing
    assert AuditEntry.objects.get(action="agent.set_access").via == "console"


def test_tokens_over_the_api_create_rotate_and_revoke(owner, outsider):
    client = api(owner)
    made = client.post("/api/tokens/", {"name": "ci", "days": 30}, format="json")
    assert made.status_code == 201
    first = made.json()
    assert api_token_authenticate(first["secret"]).pk == first["token"]["id"]
    assert [t["id"] for t in client.get("/api/tokens/").json()] == [first["token"]["id"]]

    rotated = client.post(f"/api/tokens/{first['token']['id']}/rotate/")
    assert rotated.status_code == 201
    second = rotated.json()
    assert second["secret"] != first["secret"] and second["token"]["name"] == "ci"
    assert second["token"]["expiresAt"] == first["token"]["expiresAt"]
    with pytest.raises(TokenInvalid):
        api_token_authenticate(first["secret"])  # the old secret is dead
    assert api_token_authenticate(second["secret"]).pk == second["token"]["id"]
    again = client.post(f"/api/tokens/{first['token']['id']}/rotate/")
    assert again.status_code == 409  # a revoked token is not rotated

    assert api(outsider).post(f"/api/tokens/{second['token']['id']}/revoke/").status_code == 404  # not theirs
    assert client.post(f"/api/tokens/{second['token']['id']}/revoke/").status_code == 200
    assert ApiToken.objects.get(pk=second["token"]["id"]).revoked_at is not None

    token = api_token_create(user=owner, read_only=True).secret
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert reader.post("/api/tokens/", {}, format="json").status_code == 403  # a read-only token cannot mint


def test_console_rotate_shows_the_new_secret_once(owner, staff, client):
    issued = api_token_create(user=owner, name="deploy")
    client.force_login(staff)
    response = client.post("/admin/runtime/apitoken/", {"action": "rotate_tokens", "_selected_action": [issued.token.pk]}, follow=True)
    shown = " ".join(str(m) for m in response.context["messages"])
    new = ApiToken.objects.exclude(pk=issued.token.pk).get()
    assert new.prefix in shown and "will not be shown again" in shown
    secret = shown.split('class="console-secret">')[1].split("<")[0]
    assert api_token_authenticate(secret).pk == new.pk
    with pytest.raises(TokenInvalid):
        api_token_authenticate(issued.secret)
    assert AuditEntry.objects.get(action="token.rotate").actor == staff
