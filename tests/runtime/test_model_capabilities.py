"""A model without tool support gets no tools: the projection the turn, the API
and the console share turns every tool off with the model as the reason, so the run sends
no definitions, its system prompt has no tool guidelines and no skill index, and a tool
call the model makes anyway is refused."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from runtime.agents.system_prompt import build_system_prompt
from runtime.agents.tools import agent_tool_projection
from runtime.models import ModelConfig, RunStatus
from sessions_tree.providers import get_provider
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)

HINTED = {"per_tool": {"grep": {"prompt_hint": "Prefer grep for searching."}}}
SCRIPT = rules(
    {"match": {"contains": "run bash"}, "replies": [[{"tool_call": {"name": "bash", "arguments": {"command": "echo hi"}}}], [{"text": "ok"}]]},
    {"match": {"system": "Tool guidelines"}, "reply": [{"text": "I was given tool guidelines"}]},
    default={"reply": [{"text": "no tool guidelines here"}]},
)


def last_text(driver) -> str:
    message = get_provider(driver.agent.session_provider).build_context(driver.session_id).messages[-1]
    return message["content"][-1].get("text", "")


def test_a_model_without_tools_gets_none_in_the_projection_the_prompt_and_the_run(driver_for, staff):
    driver = driver_for(SCRIPT, tool_policy=HINTED)
    with_tools = agent_tool_projection(driver.agent)
    assert "grep" in with_tools.effective_names()  # the control: the same agent with a tool model
    assert driver.prompt("hello").status == RunStatus.COMPLETED
    assert last_text(driver) == "I was given tool guidelines"

    ModelConfig.objects.filter(pk=driver.agent.model_id).update(supports_tools=False)
    driver.agent.refresh_from_db()
    projection = agent_tool_projection(driver.agent)
    assert projection.effective_names() == []
    assert {d.source for d in projection} <= {"model", "governance"}
    assert "does not support tool calls" in projection["grep"].reason
    assert agent_tool_projection(driver.agent, for_subagent=True).effective_names() == []
    prompt = build_system_prompt(driver.agent, projection, cwd="/w")
    assert "Tool guidelines" not in prompt and "<available_skills>" not in prompt

    assert driver.prompt("hello again").status == RunStatus.COMPLETED
    assert last_text(driver) == "no tool guidelines here"
    run = driver.prompt("run bash now")
    assert run.status == RunStatus.COMPLETED
    result = get_provider(driver.agent.session_provider).build_context(driver.session_id).messages[-2]
    assert result["role"] == "toolResult" and result["isError"] is True  # refused: bash is not effective

    client = APIClient()
    client.force_login(staff)
    body = client.get(f"/api/agents/{driver.agent.name}/tools/").json()
    assert not any(t["effective"] for t in body["tools"]) and body["tools"][0]["source"] in ("model", "governance")


def test_a_run_with_a_model_override_follows_that_models_capability(driver_for):
    driver = driver_for(SCRIPT, tool_policy=HINTED)
    plain = ModelConfig.objects.get(pk=driver.agent.model_id)
    plain.pk, plain.name, plain.supports_tools = None, "no-tools", False
    plain.save()
    assert driver.prompt("hello", model_name="no-tools").status == RunStatus.COMPLETED
    assert last_text(driver) == "no tool guidelines here"
