"""The console's agent pages: the list's usable / tools / skills / subagents
columns, the structured policy editors (validated by the policy parsers, audited, keys they
do not show kept), the report's warnings, and view-only staff."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from audit.models import AuditEntry
from runtime.models import Agent, ModelConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def agent(tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "ws"
    model = ModelConfig.objects.create(name="scripted", provider_kind="scripted", model_id="s")
    return Agent.objects.create(name="helper", model=model, tool_policy={"disabled": ["bash"]})


def editor_data(page) -> dict:
    """What the browser would post back: every field of the three forms as rendered."""
    data = {}
    for key in ("tools", "skills", "subagents"):
        form = page.context[key]
        for name in form.fields:
            value = form[name].value()
            if isinstance(value, bool):
                if value:
                    data[form.add_prefix(name)] = "on"
            elif isinstance(value, list):
                data[form.add_prefix(name)] = value
            elif value is not None:
                data[form.add_prefix(name)] = value
    return data


def cells(html: str, name: str) -> dict[str, str]:
    """The list row of agent ``name``: its cells by column (``field-<column>``)."""
    row = html.split(f">{name}</a>")[1].split("</tr>")[0]
    return dict(re.findall(r'<td class="field-([a-z_]+)[^"]*">(.*?)</td>', row, flags=re.S))


def test_the_list_shows_usable_tools_skills_and_delegation(console, agent):
    keyed = ModelConfig.objects.create(name="remote", provider_kind="anthropic", model_id="c", api_key_env="TEST_UNSET_KEY")
    Agent.objects.create(name="keyless", model=keyed, subagent_policy={"enabled": True, "agents": ["helper"]})
    html = console.get(reverse("admin:runtime_agent_changelist")).content.decode()
    helper, keyless = cells(html, "helper"), cells(html, "keyless")
    assert "icon-yes" in helper["usable"] and "icon-no" in keyless["usable"]  # its key variable is not set
    assert int(keyless["tool_count"]) == int(helper["tool_count"]) + 1 + 3  # bash back, and task/parallel/chain
    assert helper["subagents_on"] == "off" and keyless["subagents_on"] == "delegates"
    assert helper["skill_count"] == "0"


def test_the_policy_editor_saves_through_the_service_with_an_audit_row(console, agent, staff):
    url = reverse("admin:runtime_agent_policies", args=[agent.pk])
    page = console.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Effective tools" in html and "System prompt" in html and "Stored JSON" in html
    data = editor_data(page)
    assert data["tools-bash__mode"] == "off"
    data.update({"tools-grep__mode": "off", "tools-read__sub": "no", "tools-ls__hint": "List before you read."})
    response = console.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert set(agent.tool_policy["disabled"]) == {"bash", "grep"}
    assert agent.tool_policy["per_tool"] == {"read": {"allow_in_subagent": False}, "ls": {"prompt_hint": "List before you read."}}
    row = AuditEntry.objects.get(action="agent.change")
    assert row.actor == staff and row.via == "console" and set(row.after) == {"tool_policy"}
    assert row.before["tool_policy"] == {"disabled": ["bash"]}
    again = console.get(url).content.decode()
    assert "List before you read." in again  # the hint is in the prompt preview


def test_a_refused_policy_shows_the_parsers_message_and_saves_nothing(console, agent):
    url = reverse("admin:runtime_agent_policies", args=[agent.pk])
    data = editor_data(console.get(url))
    data["sub-enabled"] = "on"  # delegation on, but no child agent ticked
    response = console.post(url, data)
    assert response.status_code == 400
    assert "name at least one child agent when delegation is enabled" in response.content.decode()
    agent.refresh_from_db()
    assert agent.subagent_policy == {} and not AuditEntry.objects.exists()


def test_delegation_and_a_worker_route_the_tool_cannot_take(console, agent):
    url = reverse("admin:runtime_agent_policies", args=[agent.pk])
    data = editor_data(console.get(url))
    data.update({"sub-enabled": "on", "sub-agents": ["helper"], "sub-tools_deny": ["bash"]})
    assert console.post(url, data).status_code == 302
    agent.refresh_from_db()
    assert agent.subagent_policy["enabled"] is True and agent.subagent_policy["tools"]["deny"] == ["bash"]
    html = console.get(url).content.decode()
    delegate = html.split("<code>delegate_task</code>")[1].split("</tr>")[0]
    assert "✓ on" in delegate  # the delegate tools are effective now (as the agent)


def test_warnings_name_a_keyless_or_disabled_model_and_a_missing_tool(console, agent):
    ModelConfig.objects.filter(pk=agent.model_id).update(enabled=False, supports_tools=False)
    Agent.objects.filter(pk=agent.pk).update(tool_policy={"disabled": ["bash", "gone_tool"]})
    html = console.get(reverse("admin:runtime_agent_change", args=[agent.pk])).content.decode()
    assert "is disabled: runs of this agent fail" in html
    assert "does not support tool calls" in html
    assert "names a missing tool &#x27;gone_tool&#x27;" in html


def test_view_only_staff_see_the_editor_disabled_and_cannot_post(client, django_user_model, agent):
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_agent"))
    client.force_login(user)
    url = reverse("admin:runtime_agent_policies", args=[agent.pk])
    page = client.get(url)
    assert page.status_code == 200 and "disabled" in page.content.decode() and "Save policies" not in page.content.decode()
    assert client.post(url, editor_data(page)).status_code == 403


def test_the_editor_keeps_what_it_has_no_field_for(console, agent):
    Agent.objects.filter(pk=agent.pk).update(
        tool_policy={"disabled": ["bash"], "per_tool": {"delegate_task": {"prompt_hint": "Delegate big searches."}}},
        subagent_policy={"result_chars_per_child": 5000},
    )
    url = reverse("admin:runtime_agent_policies", args=[agent.pk])
    data = editor_data(console.get(url))
    data["tools-grep__mode"] = "off"
    assert console.post(url, data).status_code == 302
    agent.refresh_from_db()
    assert agent.tool_policy["per_tool"] == {"delegate_task": {"prompt_hint": "Delegate big searches."}}
    assert agent.subagent_policy == {"result_chars_per_child": 5000}  # unchanged in meaning: left as stored


def test_the_agent_page_leads_with_its_state_and_loses_no_field(console, agent):
    from runtime.admin.common import grouped

    page = console.get(reverse("admin:runtime_agent_change", args=[agent.pk]))
    sets = page.context["adminform"].fieldsets
    assert sets[0][0] is None and sets[0][1]["fields"][:4] == ["name", "enabled", "model", "warnings"]
    shown = {name for _, options in sets for name in options["fields"]}
    assert set(page.context["adminform"].form.fields) <= shown  # every editable field is on the page
    # A field no group names (one a later change adds) still shows, at the end.
    assert grouped(["a", "b", "c", "id"], ((None, ("a",)),)) == [(None, {"fields": ["a"], "classes": ()}), ("Other settings", {"fields": ["b", "c"]})]


def test_the_agent_page_shows_what_each_child_agent_gets_with_reasons(console, agent):
    # helper (bash off in its own policy) is the child; boss may not use grep and denies write to children.
    boss = Agent.objects.create(
        name="boss", model=agent.model, tool_policy={"disabled": ["grep"]},
        subagent_policy={"enabled": True, "agents": ["helper"], "tools": {"deny": ["write"]}},
    )  # fmt: skip
    html = console.get(reverse("admin:runtime_agent_policies", args=[boss.pk])).content.decode()
    assert "What each child agent gets from boss" in html
    section = html.split("What each child agent gets from boss")[1].split("</section>")[0]
    row = section.split("<code>helper</code>")[1].split("</tr>")[0]
    granted, taken = row.split("</td>")[1], row.split("</td>")[2]
    assert "<code>ls</code>" in granted and "<code>grep</code>" not in granted and "<code>write</code>" not in granted
    assert "<code>grep</code>" in taken and "parent run does not have it" in taken
    assert "<code>write</code>" in taken and "subagent_policy.tools.deny" in taken and "<code>bash</code>" in taken
    # An agent that does not delegate has no such section.
    plain = console.get(reverse("admin:runtime_agent_policies", args=[agent.pk])).content.decode()
    assert "What each child agent gets" not in plain
