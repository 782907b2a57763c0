"""``subagent_policy``: strict parsing with errors that name the key, the agent's form, the API."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from runtime.agents.subagent_policy import (
    DELEGATE_TOOLS,
    SubagentPolicy,
    SubagentPolicyError,
    effective_tool_policy,
)
from tests.subagents.host_helpers import make_agent, script


def test_defaults():
    policy = SubagentPolicy.from_dict({})
    assert not policy.enabled and policy.max_depth == 1 and policy.max_tasks_per_call == 8 and policy.max_concurrency == 4
    assert policy.child_budget.max_turns == 20 and policy.batch_budget.max_tokens is None
    assert SubagentPolicy.from_dict(policy.to_dict()) == policy


@pytest.mark.parametrize(
    "data, where",
    [
        ([], "subagent_policy: must be a JSON object"),
        ({"enabld": True}, "unknown key(s) 'enabld'"),
        ({"enabled": "yes"}, "subagent_policy.enabled: must be true or false"),
        ({"enabled": True}, "subagent_policy.agents: name at least one child agent"),
        ({"max_depth": 0}, "subagent_policy.max_depth: must be an integer from 1 to 4"),
        ({"max_tasks_per_call": 33}, "subagent_policy.max_tasks_per_call"),
        ({"max_concurrency": True}, "subagent_policy.max_concurrency"),
        ({"child_budget": {"max_turns": 0}}, "subagent_policy.child_budget.max_turns: must be an integer from 1 to 1000, got 0"),
        ({"child_budget": {"idle_seconds": 1}}, "subagent_policy.child_budget.idle_seconds: must be at least 5"),
        ({"child_budget": {"wall": 1}}, "subagent_policy.child_budget: unknown key(s) 'wall'"),
        ({"batch_budget": {"max_cost": -1}}, "subagent_policy.batch_budget.max_cost"),
        ({"tools": {"deny": "bash"}}, "subagent_policy.tools.deny: must be a list of names"),
        ({"agents": ["a", "a"]}, "subagent_policy.agents[1]: names 'a' twice"),
        ({"result_chars_per_child": 5000, "result_chars_per_batch": 2000}, "result_chars_per_batch: must be at least"),
    ],
)
def test_bad_policies_name_the_key(data, where):
    with pytest.raises(SubagentPolicyError) as caught:
        SubagentPolicy.from_dict(data)
    assert where in str(caught.value)


def test_every_problem_is_listed_at_once():
    with pytest.raises(SubagentPolicyError) as caught:
        SubagentPolicy.from_dict({"max_depth": 9, "max_concurrency": 0})
    assert len(caught.value.problems) == 2


def test_effective_tool_policy_switches_the_delegate_tools():
    tools, runtime = effective_tool_policy({"disabled": ["bash"]}, {"enabled": True, "agents": ["x"]})
    assert set(DELEGATE_TOOLS) <= set(tools["enabled"]) and tools["disabled"] == ["bash"] and runtime == {}
    _, runtime = effective_tool_policy({}, {})
    assert set(runtime["denied"]) == set(DELEGATE_TOOLS) and "delegation is off" in runtime["denied"]["delegate_task"]
    _, runtime = effective_tool_policy({}, {"enabled": True, "agents": ["x"]}, depth=1)
    assert "max subagent depth 1 reached" in runtime["denied"]["delegate_task"]
    _, runtime = effective_tool_policy({}, {"enabled": "nope"})
    assert "invalid" in runtime["denied"]["delegate_task"]


@pytest.mark.django_db
def test_the_agent_form_refuses_an_unknown_child_agent_or_tool(tmp_path):
    agent = make_agent("boss", script(), workspace=tmp_path)
    agent.subagent_policy = {"enabled": True, "agents": ["ghost"], "tools": {"deny": ["nosuchtool"]}}
    with pytest.raises(ValidationError) as caught:
        agent.full_clean()
    message = " ".join(caught.value.message_dict["subagent_policy"])
    assert "agents[0]: no agent named 'ghost'" in message and "tools.deny[0]: no tool named 'nosuchtool'" in message
    agent.subagent_policy = {"enabled": True, "agents": ["boss"], "tools": {"deny": ["bash"]}}
    agent.full_clean()  # itself, and a real tool: fine


@pytest.mark.django_db
def test_the_api_shows_the_parent_and_the_child_projection(client, tmp_path, django_user_model, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path
    staff = django_user_model.objects.create_user("s", password="p", is_staff=True, is_superuser=True)
    client.force_login(staff)
    make_agent("boss", script(), workspace=tmp_path, subagent_policy={"enabled": True, "agents": ["boss"]})
    parent = {t["name"]: t for t in client.get("/api/agents/boss/tools/").json()["tools"]}
    assert parent["delegate_parallel"]["effective"] is True
    child = client.get("/api/agents/boss/tools/?for=subagent").json()
    assert child["forSubagent"] is True
    tools = {t["name"]: t for t in child["tools"]}
    assert tools["delegate_parallel"]["effective"] is False and "cannot delegate further" in tools["delegate_parallel"]["reason"]
    assert tools["ls"]["effective"] is True
    assert client.get("/api/agents/boss/tools/?for=robot").status_code == 400
    from runtime.models import Agent

    Agent.objects.filter(name="boss").update(subagent_policy={"enabled": 3})
    response = client.get("/api/agents/boss/tools/")
    assert response.status_code == 409 and "subagent_policy.enabled" in response.json()["error"]["message"]
    assert client.get("/api/agents/boss/").json()["subagentPolicy"] == {"enabled": 3}


@pytest.mark.django_db
def test_the_api_shows_each_child_agents_projection_under_the_parents_policy(client, tmp_path, django_user_model, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path
    staff = django_user_model.objects.create_user("s", password="p", is_staff=True, is_superuser=True)
    client.force_login(staff)
    make_agent("helper", script(), workspace=tmp_path, tool_policy={"disabled": ["write"]})
    make_agent("reader", script(), workspace=tmp_path)
    make_agent(
        "boss", script(), workspace=tmp_path, tool_policy={"disabled": ["grep"]},
        subagent_policy={"enabled": True, "agents": ["helper", "reader"], "tools": {"deny": ["bash"]}},
    )  # fmt: skip
    body = client.get("/api/agents/boss/tools/?for=subagent").json()
    children = {c["agent"]: c for c in body["children"]}
    assert set(children) == {"helper", "reader"}
    helper = {t["name"]: t["route"] for t in children["helper"]["tools"]}
    denied = {d["name"]: d["reason"] for d in children["helper"]["denied"]}
    assert helper["ls"] == "worker-local" and "read" in helper
    # the parent was denied grep: no child gets it; the policy's deny and the child's own policy win too
    assert not {"grep", "bash", "write", "ask_user"} & set(helper)
    assert "parent run does not have it" in denied["grep"] and "subagent_policy.tools.deny" in denied["bash"]
    assert "write" in denied and "write" in {t["name"] for t in children["reader"]["tools"]}
    assert "grep" not in {t["name"] for t in children["reader"]["tools"]}
    assert client.get("/api/agents/boss/tools/").json().get("children") is None
