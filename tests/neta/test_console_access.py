"""The console's Access page: who may use each agent (as the rule the API enforces has it) and what
each staff account may do (from its permissions and its groups'), in a constant number of queries."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runtime.agents.access import agent_usable_by
from runtime.agents.services import agent_set_access
from runtime.models import Agent, ModelConfig

pytestmark = pytest.mark.django_db

URL = "/admin/console/access/"


def perms(*names):
    return [Permission.objects.get(content_type__app_label=n.split(".")[0], codename=n.split(".")[1]) for n in names]


@pytest.fixture
def agents(staff, owner):
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="s")
    open_agent = Agent.objects.create(name="open", model=model)
    closed = Agent.objects.create(name="closed", model=model)
    team = Group.objects.create(name="team")
    agent_set_access(agent_id=closed.pk, actor=staff, restricted=True, users=[owner], groups=[team])
    return open_agent, closed


def row(page: str, attr: str) -> str:
    start = page.index(attr)
    return page[start: page.index("</tr>", start)]


def test_it_shows_who_may_use_each_agent_as_the_rule_decides(client, staff, owner, outsider, agents):
    open_agent, closed = agents
    client.force_login(staff)
    page = client.get(URL).content.decode()
    assert "everyone" in row(page, 'data-agent="open"')
    closed_row = row(page, 'data-agent="closed"')
    assert "only users <strong>owner</strong>; members of <strong>team</strong>" in closed_row
    assert reverse("admin:runtime_agent_access", args=[closed.pk]) in closed_row
    # What the page says is what the rule enforces.
    closed.refresh_from_db()
    assert agent_usable_by(closed, owner) and not agent_usable_by(closed, outsider)


def test_each_staff_account_has_its_role_from_its_own_and_its_groups_permissions(client, staff, django_user_model):
    viewers = Group.objects.create(name="viewers")
    viewers.permissions.add(*perms("sessions_tree.view_agentsession", "runtime.view_agentrun", "runtime.view_agent"))
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.groups.add(viewers)
    operator = django_user_model.objects.create_user("operator", is_staff=True)
    operator.user_permissions.add(*perms("sessions_tree.view_agentsession", "sessions_tree.change_agentsession", "sessions_tree.delete_agentsession", "runtime.view_agentrun"))
    django_user_model.objects.create_user("bare", is_staff=True)
    django_user_model.objects.create_user("gone", is_staff=True, is_active=False)
    django_user_model.objects.create_user("plain")  # not staff
    client.force_login(staff)
    page = client.get(URL).content.decode()
    assert "pill-ok\">superuser" in row(page, 'data-user="staff"')
    viewer_row = row(page, 'data-user="viewer"')
    assert "pill-warn\">view-only<" in viewer_row and ">viewers<" in viewer_row
    assert [cell.split("<")[0] for cell in viewer_row.split('class="level">')[1:]] == ["view", "view", "view", "—", "—", "—", "—", "—", "—", "—"]
    assert 'class="directs-keys">—' in viewer_row
    operator_row = row(page, 'data-user="operator"')
    assert "can change: Sessions" in operator_row and ">change, delete<" in operator_row
    assert "no console rights" in row(page, 'data-user="bare"')
    keyholder = django_user_model.objects.create_user("keyholder", is_staff=True)
    keyholder.user_permissions.add(*perms("runtime.change_modelconfig", "runtime.direct_model_keys"))
    keyholder_row = row(client.get(URL).content.decode(), 'data-user="keyholder"')
    assert "directs API keys" in keyholder_row and 'class="directs-keys"><span class="pill pill-warn">yes' in keyholder_row
    assert 'data-user="gone"' not in page and 'data-user="plain"' not in page


def test_the_page_costs_the_same_for_3_staff_as_for_30(client, staff, django_user_model, agents):
    viewers = Group.objects.create(name="viewers")
    viewers.permissions.add(*perms("sessions_tree.view_agentsession"))

    def make(start, stop):
        for i in range(start, stop):
            user = django_user_model.objects.create_user(f"s{i}", is_staff=True)
            user.groups.add(viewers)
            user.user_permissions.add(*perms("runtime.view_agentrun"))
            Agent.objects.create(name=f"agent-{i}", model=agents[0].model, access_restricted=True).allowed_users.add(user)

    client.force_login(staff)
    make(0, 3)
    with CaptureQueriesContext(connection) as few:
        assert client.get(URL).status_code == 200
    make(3, 30)
    with CaptureQueriesContext(connection) as many:
        page = client.get(URL).content.decode()
    assert page.count("pill-warn\">view-only<") == 30
    assert len(many.captured_queries) == len(few.captured_queries), [q["sql"][:150] for q in many.captured_queries]


def test_it_is_for_staff_and_changes_nothing(client, owner, django_user_model):
    client.force_login(owner)
    assert client.get(URL).status_code == 302  # to the admin's sign-in
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    client.force_login(viewer)
    assert client.get(URL).status_code == 200
    assert client.post(URL).status_code == 405
