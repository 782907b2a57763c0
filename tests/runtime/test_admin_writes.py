"""Console writes go through the services.

Through Django's test client, as a superuser and as staff holding fewer
permissions: deleting a session in the admin (its page or "delete selected")
is ``session_delete`` (file, entry rows, event log, runs) and is refused while
a run is active; the title and the agent change through ``session_rename`` /
``session_set_agent`` (an entry or an event, a revision); runs, tokens and tools
offer only what a service does, to those allowed to do it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from runtime.api.tokens import api_token_create
from runtime.models import Agent, AgentRun, ApiToken, RunInput
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.models import AgentSession, SessionEntry, SessionEvent
from sessions_tree.providers import get_provider
from tests.support.builders import default_agent
from tests.support.entries import assistant_message, user_message

pytestmark = pytest.mark.django_db(transaction=True)

SESSIONS = "/admin/sessions_tree/agentsession/"


@pytest.fixture
def agent(sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    settings.NETA_TASK_BACKEND = "inline"
    return default_agent()


@pytest.fixture
def superuser_client(client, staff):
    client.force_login(staff)  # the shared ``staff`` fixture is a superuser
    return client


def staff_with(django_user_model, client, *codenames: str):
    """A client logged in as staff holding only ``codenames``."""
    user = django_user_model.objects.create_user(f"staff-{'-'.join(codenames) or 'none'}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def conversation(agent: Agent, provider: str = "file", *, owner=None) -> AgentSession:
    Agent.objects.filter(pk=agent.pk).update(session_provider=provider)
    agent.refresh_from_db()
    meta = session_start(agent=agent, user=owner)
    store = get_provider(meta.provider)
    store.append_message(meta.session_id, user_message("hello"))
    store.append_message(meta.session_id, assistant_message("hi there"))
    return AgentSession.objects.get(pk=meta.pk)


def finished_run(meta: AgentSession) -> AgentRun:
    run = session_prompt(actor=None, session_id=meta.session_id, text="one more", dispatch=False).run
    execute_run(run.run_id)
    run.refresh_from_db()
    assert not run.is_active
    return run


def assert_gone(meta: AgentSession):
    assert not AgentSession.objects.filter(session_id=meta.session_id).exists()
    assert not SessionEntry.objects.filter(session_id=meta.pk).exists()
    assert not SessionEvent.objects.filter(session_id=meta.pk).exists()
    assert not AgentRun.objects.filter(session_id=meta.session_id).exists()
    assert not RunInput.objects.filter(run__session_id=meta.session_id).exists()
    if meta.session_file:
        assert not Path(meta.session_file).exists()


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


# --------------------------------------------------------------------------- delete


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_deleting_a_session_in_the_admin_removes_file_rows_and_runs(superuser_client, agent, provider):
    meta = conversation(agent, provider)
    run = finished_run(meta)
    meta.refresh_from_db()
    page = superuser_client.get(f"{SESSIONS}{meta.pk}/delete/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"<td>{meta.entry_count}</td>" in html  # entries
    if provider == "file":
        assert meta.session_file in html
    else:
        assert f"{meta.entry_count} entry rows in the database" in html
    assert "<td>1</td>" in html  # one run
    assert 'value="Delete 1 session"' in html

    response = superuser_client.post(f"{SESSIONS}{meta.pk}/delete/", {"post": "yes"}, follow=True)

    assert response.status_code == 200
    assert any("Deleted 1 session" in m for m in messages_of(response))
    assert_gone(meta)
    assert not AgentRun.objects.filter(pk=run.pk).exists()


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_deleting_a_session_with_an_active_run_is_refused_and_says_why(superuser_client, agent, provider):
    meta = conversation(agent, provider)
    run = session_prompt(actor=None, session_id=meta.session_id, text="still queued", dispatch=False).run
    page = superuser_client.get(f"{SESSIONS}{meta.pk}/delete/").content.decode()
    assert "Will not be deleted" in page and str(run.run_id) in page and "abort it first" in page
    assert 'name="post"' not in page  # nothing to confirm

    response = superuser_client.post(f"{SESSIONS}{meta.pk}/delete/", {"post": "yes"}, follow=True)

    assert any("a run is active" in m for m in messages_of(response)), messages_of(response)
    assert AgentSession.objects.filter(pk=meta.pk).exists()
    assert AgentRun.objects.filter(pk=run.pk).exists()
    assert SessionEvent.objects.filter(session_id=meta.pk).exists()
    if meta.session_file:
        assert Path(meta.session_file).exists()


def test_delete_selected_goes_through_the_service_and_skips_busy_sessions(superuser_client, agent):
    idle_file, idle_rows, busy = conversation(agent, "file"), conversation(agent, "mysql"), conversation(agent, "file")
    finished_run(idle_file)
    session_prompt(actor=None, session_id=busy.session_id, text="running", dispatch=False)
    chosen = {"action": "delete_selected", "_selected_action": [idle_file.pk, idle_rows.pk, busy.pk]}
    confirm = superuser_client.post(SESSIONS, chosen)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert idle_file.session_file in html and "Will not be deleted" in html and 'value="Delete 2 sessions"' in html
    for s in (idle_file, idle_rows, busy):
        assert s.session_id in html

    # Everything selected is posted (as if the busy one had been idle when the page was drawn).
    response = superuser_client.post(SESSIONS, {**chosen, "post": "yes"}, follow=True)

    shown = messages_of(response)
    assert any("Deleted 2 session(s)" in m for m in shown), shown
    assert any("a run is active" in m and str(busy) in m for m in shown), shown
    assert_gone(idle_file)
    assert_gone(idle_rows)
    assert AgentSession.objects.filter(pk=busy.pk).exists() and Path(busy.session_file).exists()


def test_a_session_whose_file_is_gone_is_reported_not_a_server_error(superuser_client, agent):
    meta = conversation(agent, "file")
    Path(meta.session_file).unlink()
    assert superuser_client.get(f"{SESSIONS}{meta.pk}/delete/").status_code == 200
    response = superuser_client.post(f"{SESSIONS}{meta.pk}/delete/", {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert any(m.startswith("Not deleted:") and "missing" in m for m in messages_of(response)), messages_of(response)


def test_the_generic_delete_never_removes_the_row_alone(superuser_client, agent, staff):
    """The model admin's own delete hooks (used by any other Django path) are the service too."""
    from django.contrib import admin
    from django.test import RequestFactory

    meta = conversation(agent, "file")
    finished_run(meta)
    model_admin = admin.site._registry[AgentSession]
    request = RequestFactory().post(SESSIONS)
    request.user = staff  # the service is told who deletes
    model_admin.delete_queryset(request, AgentSession.objects.filter(pk=meta.pk))
    assert_gone(meta)


def test_staff_without_the_delete_permission_cannot_delete(client, django_user_model, agent):
    meta = conversation(agent, "file")
    staff = staff_with(django_user_model, client, "view_agentsession", "change_agentsession")
    assert staff.get(f"{SESSIONS}{meta.pk}/delete/").status_code == 403
    assert staff.post(f"{SESSIONS}{meta.pk}/delete/", {"post": "yes"}).status_code == 403
    listing = staff.get(SESSIONS).content.decode()
    assert "delete_selected" not in listing
    staff.post(SESSIONS, {"action": "delete_selected", "_selected_action": [meta.pk], "post": "yes"})
    assert AgentSession.objects.filter(pk=meta.pk).exists() and Path(meta.session_file).exists()


# --------------------------------------------------------------------------- change


def change_form(meta: AgentSession, **changes) -> dict:
    return {"title": meta.title, "agent": meta.agent, "status": meta.status, "_save": "Save", **changes}


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_a_title_edit_is_a_session_info_entry_with_a_revision_and_an_event(superuser_client, agent, provider):
    meta = conversation(agent, provider)
    before = meta.revision

    response = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, title="  Renamed in the console "))

    assert response.status_code == 302, response.content.decode()[:2000]
    after = AgentSession.objects.get(pk=meta.pk)
    assert after.title == "Renamed in the console"
    assert after.revision == before + 1
    entries = get_provider(provider).list_entries(meta.session_id)
    assert entries[-1]["type"] == "session_info" and entries[-1]["name"] == "Renamed in the console"
    assert after.leaf_entry_id == entries[-1]["id"]
    event = SessionEvent.objects.get(session_id=meta.pk, revision=after.revision)
    assert event.type == "session_entry_added" and entries[-1]["id"] in event.payload


def test_an_empty_title_is_refused(superuser_client, agent):
    meta = conversation(agent)
    superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, title="Named"))
    response = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, title="   "))
    assert response.status_code == 200 and "must be a non-empty string" in response.content.decode()
    assert AgentSession.objects.get(pk=meta.pk).title == "Named"


def test_the_agent_is_chosen_from_the_agents_and_changed_through_the_service(superuser_client, agent):
    other = Agent.objects.create(name="reviewer", model=agent.model)
    Agent.objects.create(name="retired", model=agent.model, enabled=False)
    meta = conversation(agent)
    page = superuser_client.get(f"{SESSIONS}{meta.pk}/change/").content.decode()
    assert '<select name="agent"' in page and '<option value="reviewer">' in page
    assert "retired (disabled)" in page
    before = meta.revision

    refused = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, agent="no-such-agent"))
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    disabled = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, agent="retired"))
    assert disabled.status_code == 200 and "no enabled agent named" in disabled.content.decode()
    assert AgentSession.objects.get(pk=meta.pk).agent == agent.name
    assert AgentSession.objects.get(pk=meta.pk).revision == before

    response = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, agent=other.name))

    assert response.status_code == 302
    after = AgentSession.objects.get(pk=meta.pk)
    assert after.agent == "reviewer" and after.revision == before + 1
    event = SessionEvent.objects.get(session_id=meta.pk, revision=after.revision)
    assert event.type == "session_updated" and json.loads(event.payload)["session"] == {"agent": "reviewer"}


def test_session_set_agent_refuses_unknown_agents(agent):
    from runtime.errors import RuntimeInputError
    from runtime.sessions.services import session_set_agent

    meta = conversation(agent)
    for name in ("no-such-agent", "", None):
        with pytest.raises(RuntimeInputError):
            session_set_agent(actor=None, session_id=meta.session_id, agent_name=name)


def test_every_other_column_is_read_only(superuser_client, agent, outsider, owner):
    meta = conversation(agent, owner=owner)
    superuser_client.post(
        f"{SESSIONS}{meta.pk}/change/",
        change_form(meta, user=outsider.pk, metadata='{"x": 1}', leaf_entry_id="zzzzzzzz", revision=99, cwd="/elsewhere"),
    )
    after = AgentSession.objects.get(pk=meta.pk)
    assert (after.user_id, after.metadata, after.leaf_entry_id, after.revision, after.cwd) == (
        owner.pk, meta.metadata, meta.leaf_entry_id, meta.revision, meta.cwd
    )


def test_staff_with_view_only_see_the_session_and_change_nothing(client, django_user_model, agent):
    meta = conversation(agent)
    staff = staff_with(django_user_model, client, "view_agentsession")
    assert staff.get(f"{SESSIONS}{meta.pk}/change/").status_code == 200
    assert staff.get(f"{SESSIONS}{meta.pk}/tree/").status_code == 200
    assert staff.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, title="Mine now")).status_code == 403
    assert AgentSession.objects.get(pk=meta.pk).revision == meta.revision


# --------------------------------------------------------------------------- runs, tokens, skills, tools


def test_runs_are_read_only_and_aborted_through_run_abort(superuser_client, client, django_user_model, agent):
    meta = conversation(agent)
    run = session_prompt(actor=None, session_id=meta.session_id, text="queued", dispatch=False).run
    runs = "/admin/runtime/agentrun/"
    assert superuser_client.post(f"{runs}{run.pk}/change/", {"status": "completed"}).status_code == 403
    assert superuser_client.post(f"{runs}{run.pk}/delete/", {"post": "yes"}).status_code == 403
    superuser_client.post(runs, {"action": "delete_selected", "_selected_action": [run.pk], "post": "yes"})
    assert AgentRun.objects.get(pk=run.pk).status == "queued"

    viewer = staff_with(django_user_model, type(client)(), "view_agentrun")
    assert "abort_runs" not in viewer.get(runs).content.decode()
    viewer.post(runs, {"action": "abort_runs", "_selected_action": [run.pk]})
    assert AgentRun.objects.get(pk=run.pk).status == "queued"

    superuser_client.post(runs, {"action": "abort_runs", "_selected_action": [run.pk]})
    aborted = AgentRun.objects.get(pk=run.pk)
    assert aborted.status == "aborted" and aborted.cancel_requested  # run_abort on a queued run


def test_tokens_are_revoked_never_deleted_and_only_by_who_may_change_them(superuser_client, client, django_user_model, owner):
    token = api_token_create(user=owner, name="ci").token
    tokens = "/admin/runtime/apitoken/"
    assert superuser_client.post(f"{tokens}{token.pk}/delete/", {"post": "yes"}).status_code == 403
    superuser_client.post(tokens, {"action": "delete_selected", "_selected_action": [token.pk], "post": "yes"})
    assert ApiToken.objects.filter(pk=token.pk).exists()

    viewer = staff_with(django_user_model, type(client)(), "view_apitoken")
    viewer.post(tokens, {"action": "revoke_tokens", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None

    superuser_client.post(tokens, {"action": "revoke_tokens", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    # Renaming a revoked token writes its name only: it stays revoked.
    superuser_client.post(f"{tokens}{token.pk}/change/", {"name": "ci (old)", "_save": "Save"})
    renamed = ApiToken.objects.get(pk=token.pk)
    assert renamed.name == "ci (old)" and renamed.revoked_at is not None


def test_tool_governance_changes_only_through_its_service_and_only_by_who_may(superuser_client, client, django_user_model):
    from toolcatalog.models import ToolConfig
    from toolcatalog.services import tool_config_sync

    tool_config_sync()
    row = ToolConfig.objects.get(name="bash")
    tools = "/admin/toolcatalog/toolconfig/"
    assert superuser_client.post(f"{tools}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    superuser_client.post(tools, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"})
    assert ToolConfig.objects.filter(pk=row.pk).exists()

    viewer = staff_with(django_user_model, type(client)(), "view_toolconfig")
    viewer.post(tools, {"action": "disable_tools", "_selected_action": [row.pk]})
    assert ToolConfig.objects.get(pk=row.pk).enabled

    superuser_client.post(tools, {"action": "disable_tools", "_selected_action": [row.pk]})
    disabled = ToolConfig.objects.get(pk=row.pk)
    assert not disabled.enabled and disabled.updated_by is not None  # the service records who



def test_the_new_agent_must_keep_the_sessions_store(superuser_client, agent):
    """A file session cannot go to an agent whose sessions live in the database (its runs would not find it)."""
    Agent.objects.create(name="db-agent", model=agent.model, session_provider="mysql")
    meta = conversation(agent, "file")
    refused = superuser_client.post(f"{SESSIONS}{meta.pk}/change/", change_form(meta, agent="db-agent"))
    assert refused.status_code == 200 and "keeps its sessions with the mysql provider" in refused.content.decode()
    assert AgentSession.objects.get(pk=meta.pk).agent == agent.name


@pytest.mark.parametrize("how", ["page", "bulk"])
def test_an_agent_that_sessions_still_name_is_not_deleted(superuser_client, agent, how):
    """Its sessions would silently run as another agent (``agent_for_session`` falls
    back to the default one, with other tools and privileges)."""
    other = Agent.objects.get(pk=agent.pk)
    other.pk, other.name = None, "helper"
    other.save()
    meta = session_start(agent=other, user=None)
    if how == "page":
        response = superuser_client.post(f"/admin/runtime/agent/{other.pk}/delete/", {"post": "yes"})
    else:
        response = superuser_client.post(
            "/admin/runtime/agent/", {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"}
        )
    assert response.status_code == 200  # the page says why, nothing deleted
    assert b"session" in response.content
    assert Agent.objects.filter(name="helper").exists()
    assert AgentSession.objects.get(pk=meta.pk).agent == "helper"
    AgentSession.objects.filter(agent="helper").delete()
    response = superuser_client.post(f"/admin/runtime/agent/{other.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Agent.objects.filter(name="helper").exists()


def test_the_token_list_filters_by_state(superuser_client, owner):
    import datetime as dt

    from runtime.api.tokens import api_token_create, api_token_revoke

    live = api_token_create(user=owner, name="live").token
    gone = api_token_create(user=owner, name="gone").token
    api_token_revoke(token=gone, actor=None)
    old = api_token_create(user=owner, name="old").token
    ApiToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - dt.timedelta(days=1))
    url = reverse("admin:runtime_apitoken_changelist")
    for state, expected in (("active", {live.pk}), ("revoked", {gone.pk}), ("expired", {old.pk})):
        listed = {t.pk for t in superuser_client.get(url, {"state": state}).context["cl"].result_list}
        assert listed == expected, state
