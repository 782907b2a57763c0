"""The audit log: staff writes in the console and the API each leave one row
(who, what, before, after, via, request id) in the change's transaction; the log's page is
view-only for everyone, filterable, and costs the same queries for 3 rows as for 30."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from audit.services import record
from runtime.api.tokens import api_token_create, api_token_rotate, token_digest
from runtime.models import ApiToken
from runtime.sessions.services import session_rename
from sessions_tree.models import AgentSession
from skills_registry.models import SkillResource
from skills_registry.services import skills_set_disabled
from tests.support.builders import build_tree, default_agent

pytestmark = pytest.mark.django_db(transaction=True)

LOG = "/admin/audit/auditentry/"
SESSIONS = "/admin/sessions_tree/agentsession/"


@pytest.fixture
def agent(sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    settings.NETA_TASK_BACKEND = "inline"
    return default_agent()


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


def test_a_console_rename_and_archive_each_leave_a_row_with_before_and_after(console, agent, owner, staff):
    meta = session_of(build_tree(owner, agent))
    form = {"title": "Renamed", "agent": meta.agent, "status": "archived", "_save": "Save"}
    response = console.post(f"{SESSIONS}{meta.pk}/change/", form, HTTP_X_REQUEST_ID="req-123")
    assert response.status_code == 302, response.content[:2000]
    assert response["X-Request-ID"] == "req-123"
    rows = {r.action: r for r in AuditEntry.objects.filter(target_id=meta.session_id)}
    assert set(rows) == {"session.rename", "session.set_status"}
    rename = rows["session.rename"]
    assert rename.actor == staff and rename.actor_name == staff.username and rename.via == "console"
    assert rename.before == {"title": meta.title} and rename.after == {"title": "Renamed"}
    assert rename.target_type == "sessions_tree.agentsession" and rename.request_id == "req-123"
    assert rows["session.set_status"].before == {"status": "active"} and rows["session.set_status"].after == {"status": "archived"}


def test_a_refused_console_write_leaves_no_row(console, agent, owner):
    meta = session_of(build_tree(owner, agent))
    console.post(f"{SESSIONS}{meta.pk}/change/", {"title": "", "agent": meta.agent, "status": meta.status, "_save": "Save"})
    assert not AuditEntry.objects.exists()


def test_the_row_commits_with_the_change_or_neither_does(agent, owner, staff, monkeypatch):
    meta = session_of(build_tree(owner, agent))
    title = meta.title

    def broken(**kwargs):
        raise RuntimeError("the audit row could not be written")

    monkeypatch.setattr("runtime.sessions.services.record", broken)
    with pytest.raises(RuntimeError):
        session_rename(session_id=meta.session_id, title="Not kept", actor=staff)
    meta.refresh_from_db()
    assert meta.title == title  # the rename rolled back with the audit row
    assert not any(e.get("name") == "Not kept" for e in build_entries(meta))


def session_of(tree) -> AgentSession:
    return AgentSession.objects.get(session_id=tree.session_id)


def build_entries(meta):
    from sessions_tree.providers import get_provider

    return get_provider(meta.provider).list_entries(meta.session_id)


def test_api_writes_by_staff_are_recorded_with_the_request_id_and_a_users_own_are_not(agent, owner, staff):
    meta = session_of(build_tree(owner, agent))
    user_client, staff_client = APIClient(), APIClient()
    user_client.force_login(owner)
    staff_client.force_login(staff)

    assert user_client.patch(f"/api/sessions/{meta.session_id}/", {"title": "Mine"}, format="json").status_code == 200
    assert not AuditEntry.objects.exists()  # the owner's own write: the session's event log has it

    response = staff_client.patch(f"/api/sessions/{meta.session_id}/", {"title": "By staff"}, format="json")
    assert response.status_code == 200
    row = AuditEntry.objects.get()
    assert (row.action, row.via, row.actor) == ("session.rename", "api", staff)
    assert row.before == {"title": "Mine"} and row.after == {"title": "By staff"}
    assert row.request_id == response["X-Request-ID"] and len(row.request_id) == 32

    meta.refresh_from_db()
    assert staff_client.delete(f"/api/sessions/{meta.session_id}/").status_code == 204
    gone = AuditEntry.objects.get(action="session.delete")
    assert gone.before["entry_count"] == meta.entry_count and gone.before["user_id"] == owner.pk
    assert gone.before["session_file"] == meta.session_file and gone.via == "api"


def test_console_agent_edits_record_only_the_changed_fields(console, agent):
    page = console.get(f"/admin/runtime/agent/{agent.pk}/change/")
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    for key in ("tool_policy", "skill_policy", "subagent_policy", "workspace_roots"):
        data[key] = form[key].value()
    data.update(description="Now described", max_tool_rounds=7, _save="Save")
    for key in [k for k, v in data.items() if v is False]:
        data.pop(key)  # an unticked checkbox is absent from a POST
    response = console.post(f"/admin/runtime/agent/{agent.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    row = AuditEntry.objects.get(action="agent.change")
    assert row.after == {"description": "Now described", "max_tool_rounds": 7}
    assert row.before == {"description": agent.description, "max_tool_rounds": agent.max_tool_rounds}
    assert row.target_id == str(agent.pk) and row.target_repr == agent.name


def test_tokens_create_revoke_and_rotate_are_recorded(console, owner, staff):
    issued = api_token_create(user=owner, name="ci", created_by=staff)
    rotated = api_token_rotate(token=issued.token, actor=staff)
    console.post("/admin/runtime/apitoken/", {"action": "revoke_tokens", "_selected_action": [rotated.token.pk]})
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "target_id"))
    assert actions == [
        ("token.create", str(issued.token.pk)),
        ("token.rotate", str(rotated.token.pk)),
        ("token.revoke", str(rotated.token.pk)),
    ]
    rotation = AuditEntry.objects.get(action="token.rotate")
    assert rotation.before["id"] == issued.token.pk and rotation.before["revoked_at"] is not None
    assert token_digest(rotated.secret) == ApiToken.objects.get(pk=rotated.token.pk).digest
    assert "digest" not in rotation.after and rotated.secret not in str(rotation.after)


def test_a_bulk_skill_switch_writes_one_row_per_skill(staff):
    skills = [
        SkillResource.objects.create(
            name=f"s{i}", scope="workspace", entry_file=f"/r/s{i}/SKILL.md", path_key=f"k{i}",
            base_dir=f"/r/s{i}", fingerprint="f" * 64, status="active", last_seen_at=timezone.now(),
        )  # fmt: skip
        for i in range(3)
    ]
    skills_set_disabled(skills=skills, disabled=True, actor=staff)
    rows = AuditEntry.objects.filter(action="skill.set_disabled").order_by("target_id")
    assert [r.target_id for r in rows] == sorted(str(s.pk) for s in skills)
    assert all(r.before == {"disabled": False} and r.after == {"disabled": True} and r.via == "cli" for r in rows)


def test_the_log_page_is_view_only_for_everyone_and_filters(console, agent, owner, staff):
    meta = session_of(build_tree(owner, agent))
    session_rename(session_id=meta.session_id, title="One", actor=staff)
    row = AuditEntry.objects.get()
    assert console.get(LOG).status_code == 200
    detail = console.get(f"{LOG}{row.pk}/change/")
    assert detail.status_code == 200 and "One" in detail.content.decode()
    assert console.get(f"{LOG}add/").status_code == 403
    assert console.post(f"{LOG}{row.pk}/change/", {"action": "x"}).status_code == 403
    assert console.post(f"{LOG}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEntry.objects.get().action == "session.rename"
    assert meta.session_id in console.get(LOG, {"action": "session.rename"}).content.decode()
    assert meta.session_id not in console.get(LOG, {"via__exact": "api"}).content.decode()


def test_the_log_list_costs_the_same_for_3_rows_as_for_30(console, staff):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert console.get(LOG).status_code == 200
        return len(queries)

    for i in range(3):
        record(actor=staff, action="agent.change", target=("runtime.agent", i, f"a{i}"), before={"x": i}, after={"x": i + 1})
    few = count()
    for i in range(27):
        record(actor=staff, action="agent.change", target=("runtime.agent", i, f"a{i}"), before={"x": i}, after={"x": i + 1})
    assert count() == few


def test_record_refuses_an_unknown_door_and_a_bad_target(staff):
    with pytest.raises(ValueError):
        record(actor=staff, action="x.y", target=("t", 1), via="email")
    with pytest.raises(TypeError):
        record(actor=staff, action="x.y", target="just a string")
    assert not AuditEntry.objects.exists()


def test_user_and_group_edits_in_the_console_are_recorded_without_the_password(console, staff, owner):
    from django.contrib.auth.models import Group

    team = Group.objects.create(name="team")
    page = console.get(f"/admin/auth/user/{owner.pk}/change/")
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if name not in ("password",)}
    data = {k: v for k, v in data.items() if v not in (None, False)}
    data.update(groups=[team.pk], first_name="Olive", _save="Save")
    data.pop("user_permissions", None)
    for key in ("date_joined", "last_login"):
        data.pop(key, None)
    data["date_joined_0"], data["date_joined_1"] = owner.date_joined.strftime("%Y-%m-%d"), owner.date_joined.strftime("%H:%M:%S")
    response = console.post(f"/admin/auth/user/{owner.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    change = AuditEntry.objects.get(action="user.change")
    assert change.after["first_name"] == "Olive" and "password" not in str(change.before) + str(change.after)
    members = AuditEntry.objects.get(action="user.change_members")
    assert members.before == {"groups": []} and members.after == {"groups": ["team"]}

    response = console.post(f"/admin/auth/user/{owner.pk}/password/", {"password1": "n3w-Passw0rd!x", "password2": "n3w-Passw0rd!x"})
    assert response.status_code == 302
    row = AuditEntry.objects.get(action="user.set_password")
    assert row.before is None and row.after is None and row.target_id == str(owner.pk)


def test_a_staff_import_over_the_api_is_recorded(agent, staff):
    from tests.support.services import FIXTURES

    client = APIClient()
    client.force_login(staff)
    with (FIXTURES / "02-branches.jsonl").open("rb") as fh:
        response = client.post("/api/sessions/import/", {"file": fh}, format="multipart")
    assert response.status_code == 201, response.content
    row = AuditEntry.objects.get(action="session.import")
    assert row.target_id == response.json()["sessionId"] and row.via == "api" and row.after["entry_count"] > 0
