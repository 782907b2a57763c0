"""A scripted turn calls an MCP tool like any other: through the agent's projection, its
result a Pi toolResult; a cancel during a hanging MCP call aborts the run and reaches the
server; a server error is a tool error, never a failed run."""

from __future__ import annotations

import pytest

from runtime.agents.tools import agent_tool_projection
from runtime.models import AgentRun, RunStatus
from sessions_tree.providers import get_provider
from tests.support.rules import rules
from tests.support.mcp_fixtures import marks, mcp_clean, no_sandbox, stdio_server, wait_for  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def tool_results(driver) -> list[dict]:
    messages = get_provider(driver.agent.session_provider).build_context(driver.session_id).messages
    return [m for m in messages if m["role"] == "toolResult"]


def calls(*tool_calls) -> dict:
    return rules({"match": {"contains": "go"}, "replies": [[{"tool_call": {"name": n, "arguments": a}} for n, a in tool_calls], [{"text": "done"}]]})


def test_a_scripted_turn_calls_mcp_tools(stdio_server, driver_for):
    stdio_server()
    driver = driver_for(calls(("mcp__demo__echo", {"text": "from the model"}), ("mcp__demo__fail", {"message": "no such ticket"}), ("mcp__demo__picture", {})))
    definitions = {d["name"] for d in agent_tool_projection(driver.agent).tool_definitions()}
    assert {"mcp__demo__echo", "mcp__demo__fail", "mcp__demo__picture"} <= definitions
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    echo, failed, picture = tool_results(driver)
    assert echo["toolName"] == "mcp__demo__echo" and echo["isError"] is False
    assert echo["content"] == [{"type": "text", "text": "echo: from the model"}]
    assert failed["isError"] is True and failed["content"][0]["text"] == "Error executing tool fail: no such ticket"
    assert picture["content"][0]["type"] == "image"


def test_an_agent_the_server_is_not_open_to_gets_a_refusal(stdio_server, driver_for):
    stdio_server(agents=["someone-else"])
    driver = driver_for(calls(("mcp__demo__echo", {"text": "x"})))
    decision = agent_tool_projection(driver.agent)["mcp__demo__echo"]
    assert not decision.effective and "open only to the agents someone-else" in decision.reason
    assert "mcp__demo__echo" not in {d["name"] for d in agent_tool_projection(driver.agent).tool_definitions()}
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED
    (refused,) = tool_results(driver)
    assert refused["isError"] and refused["content"][0]["text"] == f"Tool 'mcp__demo__echo' is not available: {decision.reason}"


def test_cancel_during_a_hanging_mcp_call(stdio_server, driver_for, marks):
    stdio_server()
    driver = driver_for(calls(("mcp__demo__hang", {})))
    thread, holder, run = driver.start("go")
    wait_for(lambda: (marks / "hang-started").exists(), timeout=60, what="the hanging tool to start")
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    thread.join(30)
    assert not thread.is_alive()
    assert holder[0].status == RunStatus.ABORTED
    (result,) = tool_results(driver)
    assert result["isError"] is True and result["details"]["cancelled"] is True
    wait_for(lambda: (marks / "hang-cancelled").exists(), what="the server to be told")


def test_a_subagent_reaches_an_mcp_tool_through_the_host(stdio_server, make_agent, workspace):
    """Children get MCP tools as main-process-proxy grants; the host answers the child's
    proxy_request from its own registry, rebuilt from the rows when it has not seen the tool."""
    from types import SimpleNamespace

    from runtime.subagents.hosting import _proxy_handler
    from toolcatalog import catalog_version
    from toolcatalog.mcp import catalog as mcp_catalog

    stdio_server()
    unnamed = make_agent(rules(), name="unnamed")
    decision = agent_tool_projection(unnamed, for_subagent=True)["mcp__demo__echo"]
    assert not decision.effective and "enables it by name" in decision.reason  # subagents only through their policies
    child = make_agent(rules(), name="child", tool_policy={"enabled": ["mcp__demo__echo"]})
    decision = agent_tool_projection(child, for_subagent=True)["mcp__demo__echo"]
    assert decision.effective and decision.route == "main-process-proxy"

    mcp_catalog.forget()  # a host process that never listed the server
    catalog_version.forget()
    envelope = SimpleNamespace(
        allowed_skills=[],
        runtime_config=SimpleNamespace(workspace_roots=[str(workspace)], cwd=str(workspace), sandbox=SimpleNamespace(mode="none")),
    )
    answer = _proxy_handler(envelope)({"name": "mcp__demo__echo", "arguments": {"text": "from a child"}})
    assert answer == {"content": [{"type": "text", "text": "echo: from a child"}], "details": {"mcp": {"server": "demo", "tool": "echo"}}, "isError": False}
