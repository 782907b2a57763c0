"""MCP tools: a real MCP server (the official SDK, over stdio and streamable HTTP) whose tools
join the catalog, are governed like builtins, run with timeouts and cancellation, and come
back after a crash."""

from __future__ import annotations

import json
import threading

import pytest
from django.core.exceptions import ValidationError

from runtime.runs.health import health_report
from tests.support.mcp_fixtures import http_url, marks, mcp_clean, no_sandbox, stdio_server, wait_for  # noqa: F401 - fixtures
from toolcatalog.mcp import connections
from toolcatalog.models import McpServer, ToolConfig
from toolcatalog.projection import resolve_tools
from toolcatalog.protocol import ToolContext, UnknownTool, get_tool, run_tool
from toolcatalog.sandbox import bwrap_status, reset_sandbox_probe
from toolcatalog.selectors import tool_catalog
from toolcatalog.services import mcp_server_refresh, mcp_server_save, tool_config_update, tool_execute

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["crash", "echo", "fail", "flood", "grow", "hang", "link", "picture", "read_file", "whoami"]


def ctx(tmp_path, **kw) -> ToolContext:
    return ToolContext(roots=(tmp_path,), **kw)


def call(tmp_path, name, args=None, **kw):
    return run_tool(get_tool(name), ctx(tmp_path, **kw), args or {})


def test_saving_a_server_lists_its_tools_into_the_catalog(stdio_server):
    refresh = stdio_server()
    assert refresh.ok, refresh.error
    assert sorted(refresh.tools) == [f"mcp__demo__{t}" for t in TOOLS]
    row = McpServer.objects.get(name="demo")
    assert sorted(t["name"] for t in row.tools) == TOOLS and row.tools_listed_at is not None and row.last_error == ""

    echo = get_tool("mcp__demo__echo")
    assert echo.parameters["properties"]["text"]["type"] == "string" and echo.parameters["required"] == ["text"]
    assert echo.manifest.to_dict() == {
        "kind": "mcp", "execution_mode": "subprocess", "supported_in_worker": False, "requires_shell": False,
        "requires_write": False, "requires_skill_scope": False, "requires_network": False, "default_route": "main-process-proxy",
    }
    assert "Echo the text back." in echo.description and "MCP server 'demo'" in echo.description
    # Governance rows like any builtin, and the catalog pages' read covers them.
    assert ToolConfig.objects.filter(name="mcp__demo__echo").exists()
    entry = next(t for t in tool_catalog() if t["name"] == "mcp__demo__echo")
    assert entry["manifest"]["kind"] == "mcp" and entry["governance"]["enabled"] is True


def test_another_process_view_comes_from_the_rows_not_the_connection(stdio_server):
    """A process that never connected (a Celery worker) registers the tools from the row."""
    stdio_server()
    from toolcatalog import catalog_version
    from toolcatalog.mcp import catalog as mcp_catalog

    mcp_catalog.forget()
    catalog_version.forget()
    with pytest.raises(UnknownTool):
        get_tool("mcp__demo__echo")
    projection = resolve_tools({})
    assert projection["mcp__demo__echo"].effective
    assert get_tool("mcp__demo__echo").remote_name == "echo"


def test_disabling_or_deleting_a_server_removes_its_tools(stdio_server):
    stdio_server()
    mcp_server_save(actor=None, name="demo", enabled=False, discover=False)
    assert resolve_tools({}).get("mcp__demo__echo") is None
    with pytest.raises(UnknownTool):
        get_tool("mcp__demo__echo")


def test_results_text_image_error_resource_and_truncation(stdio_server, tmp_path):
    stdio_server()
    text = call(tmp_path, "mcp__demo__echo", {"text": "hi"})
    assert text.is_error is False and text.content == [{"type": "text", "text": "echo: hi"}]
    assert text.details["mcp"] == {"server": "demo", "tool": "echo"}

    image = call(tmp_path, "mcp__demo__picture")
    assert image.is_error is False
    assert [b["type"] for b in image.content] == ["image"] and image.content[0]["mimeType"] == "image/png"

    failed = call(tmp_path, "mcp__demo__fail", {"message": "the disk is full"})
    assert failed.is_error is True and failed.content[0]["text"] == "Error executing tool fail: the disk is full"

    linked = call(tmp_path, "mcp__demo__link")
    assert linked.content[0]["text"] == "see the report\n[resource q3 report <file:///reports/q3.pdf> (application/pdf)]"
    assert linked.details["resources"] == [{"uri": "file:///reports/q3.pdf", "name": "q3 report", "mimeType": "application/pdf"}]

    flood = call(tmp_path, "mcp__demo__flood", {"lines": 5000})
    assert flood.details["truncation"]["truncated"] is True and flood.details["truncation"]["outputLines"] == 2000
    assert "line 1999\n\n[Output truncated: showing 2000 of 5000 lines" in flood.content[0]["text"]

    bad = call(tmp_path, "mcp__demo__echo", {"text": 5})
    assert bad.is_error and "Invalid arguments for tool 'mcp__demo__echo'" in bad.content[0]["text"]


def test_http_server_discovery_and_calls(db, http_url, tmp_path, settings):
    settings.NETA_MCP_HTTP_ALLOW = ["127.0.0.1"]  # the test server beside Neta (loopback is refused otherwise)
    refresh = mcp_server_save(actor=None, name="remote", transport="http", url=http_url, agents=["*"])
    assert refresh.ok, refresh.error
    assert "mcp__remote__echo" in refresh.tools
    tool = get_tool("mcp__remote__echo")
    assert tool.manifest.execution_mode == "in-process" and tool.manifest.default_route == "main-process-proxy"
    projection = resolve_tools({})
    result = tool_execute(name="mcp__remote__echo", args={"text": "over http"}, ctx=ctx(tmp_path), projection=projection)
    assert result.to_dict()["content"] == [{"type": "text", "text": "echo: over http"}]
    failed = tool_execute(name="mcp__remote__fail", args={}, ctx=ctx(tmp_path), projection=projection)
    assert failed.is_error and failed.content[0]["text"] == "Error executing tool fail: it went wrong"


def test_an_unreachable_server_is_recorded_not_raised(db, settings):
    settings.NETA_MCP_HTTP_ALLOW = ["127.0.0.1:9"]
    refresh = mcp_server_save(actor=None, name="nowhere", transport="http", url="http://127.0.0.1:9/mcp", connect_timeout=3)
    assert not refresh.ok and "could not start" in refresh.error
    row = McpServer.objects.get(name="nowhere")
    assert row.last_error == refresh.error and row.tools == []
    report = health_report()["mcp"]
    assert report["ok"] is False and "nowhere" in report["detail"]


def test_policy_governance_agents_and_subagents(stdio_server):
    stdio_server(agents=["alpha"])
    name = "mcp__demo__echo"
    alpha = resolve_tools({}, agent="alpha")[name]
    assert alpha.effective and alpha.source == "manifest" and alpha.kind == "mcp"
    beta = resolve_tools({}, agent="beta")[name]
    assert not beta.effective and beta.source == "governance"
    assert beta.reason == "MCP server 'demo' is open only to the agents alpha (McpServer.agents)"

    # Subagents reach it only when the agent's policy names it (then through the main
    # process); staff can still hide it from them.
    sub = resolve_tools({}, agent="alpha", for_subagent=True)[name]
    assert not sub.effective and sub.reason == "an MCP tool reaches a subagent only when the agent's policy enables it by name"
    sub = resolve_tools({"enabled": [name]}, agent="alpha", for_subagent=True)[name]
    assert sub.effective and sub.route == "main-process-proxy"
    tool_config_update(actor=None, name=name, allow_in_subagent=False)
    sub = resolve_tools({"enabled": [name]}, agent="alpha", for_subagent=True)[name]
    assert not sub.effective and sub.reason == "not allowed in subagents by staff governance"
    # worker-local is impossible for an MCP tool (a worker has no connection).
    with pytest.raises(ValidationError):
        tool_config_update(actor=None, name=name, worker_routing="worker-local")

    # The agent's own policy narrows it; staff governance switches it off for everyone.
    assert not resolve_tools({"disabled": [name]}, agent="alpha")[name].effective
    tool_config_update(actor=None, name=name, enabled=False)
    denied = resolve_tools({}, agent="alpha")[name]
    assert not denied.effective and denied.reason == "disabled by staff governance (ToolConfig)"


def test_tool_execute_refuses_a_denied_mcp_tool_without_calling_it(stdio_server, tmp_path, marks):
    stdio_server(agents=["alpha"])
    projection = resolve_tools({}, agent="beta")
    result = tool_execute(name="mcp__demo__hang", args={}, ctx=ctx(tmp_path), projection=projection)
    assert result.is_error and "open only to the agents alpha" in result.content[0]["text"]
    assert not (marks / "hang-started").exists()


def test_cancel_during_a_hanging_call_reaches_the_server(stdio_server, tmp_path, marks):
    stdio_server()
    cancel = threading.Event()
    holder = []
    worker = threading.Thread(target=lambda: holder.append(call(tmp_path, "mcp__demo__hang", cancel=cancel)))
    worker.start()
    wait_for(lambda: (marks / "hang-started").exists(), what="the hang tool to start")
    cancel.set()
    worker.join(20)
    assert not worker.is_alive()
    (result,) = holder
    assert result.is_error and result.details["cancelled"] is True
    # The SDK told the server (notifications/cancelled): the tool's task was cancelled there.
    wait_for(lambda: (marks / "hang-cancelled").exists(), what="the server to cancel the tool")
    # The connection survives a cancelled call.
    assert call(tmp_path, "mcp__demo__echo", {"text": "still here"}).text_output() == "echo: still here"


def test_a_call_timeout_is_a_tool_error(stdio_server, tmp_path, marks):
    stdio_server(call_timeout=1.0)
    result = call(tmp_path, "mcp__demo__hang")
    assert result.is_error and "timed out" in result.text_output().lower() or "timeout" in result.text_output().lower()


def test_a_crashed_server_is_restarted_with_backoff_and_reported(stdio_server, tmp_path):
    stdio_server()
    crashed = call(tmp_path, "mcp__demo__crash")
    assert crashed.is_error and "closed the connection during the call" in crashed.text_output()
    state = wait_for(lambda: connections.manager().states()["demo"]["restarts"] == 1 and connections.manager().states()["demo"], what="the crash to be seen")
    assert "crashed" in state["lastError"]
    row = wait_for(lambda: McpServer.objects.filter(name="demo", restarts=1).first(), what="the crash on the row")
    assert "restart #1" in row.last_error
    # Restarted (after 0.5 s): the next call works.
    again = call(tmp_path, "mcp__demo__echo", {"text": "back"})
    assert again.is_error is False and again.text_output() == "echo: back"
    wait_for(lambda: connections.manager().states()["demo"]["status"] == "connected", what="the restart")
    # Health: recovered (listed again after the error), the restart counted.
    wait_for(lambda: health_report()["mcp"]["ok"], what="health to show the recovery")
    server = next(s for s in health_report()["mcp"]["servers"] if s["name"] == "demo")
    assert server["restarts"] == 1 and "crashed" in server["lastError"]


def test_tools_list_changed_updates_the_catalog(stdio_server, tmp_path):
    stdio_server()
    assert call(tmp_path, "mcp__demo__grow").text_output() == "grown"
    wait_for(lambda: any(t["name"] == "extra" for t in McpServer.objects.get(name="demo").tools), what="the new tool on the row")
    assert resolve_tools({})["mcp__demo__extra"].effective
    assert call(tmp_path, "mcp__demo__extra").text_output() == "extra!"


def test_stdio_environment_is_scrubbed_and_the_server_has_its_own_group(stdio_server, tmp_path, monkeypatch):
    monkeypatch.setenv("NETA_SECRET_KEY", "do-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("MCP_TEST_TOKEN", "named-by-the-row")
    stdio_server()
    facts = json.loads(call(tmp_path, "mcp__demo__whoami").text_output())
    assert facts["secret"] == "" and "OPENAI_API_KEY" not in facts["env"]
    assert facts["named"] == "named-by-the-row"  # a variable the row names passes, though it looks secret
    assert facts["pgid"] == facts["pid"] and facts["sid"] == facts["pid"]


def test_stdio_server_runs_under_bwrap(db, marks, settings, tmp_path):
    if not bwrap_status().available:
        pytest.fail(f"bubblewrap is needed here: {bwrap_status().reason}")
    settings.NETA_SANDBOX = "bwrap"
    reset_sandbox_probe()
    import sys

    from tests.support.mcp_fixtures import SERVER, TESTS

    refresh = mcp_server_save(
        actor=None, name="boxed", transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"],
        read_only_paths=[str(TESTS)], connect_timeout=30,
    )
    assert refresh.ok, refresh.error
    facts = json.loads(call(tmp_path, "mcp__boxed__whoami", sandbox="bwrap").text_output())
    assert facts["hostname"] == "neta-sandbox"
    assert facts["pid"] < 10  # its own PID namespace


def test_bad_rows_are_refused_with_the_field(db):
    cases = [
        ({"name": "a__b", "command": "x"}, "name"),
        ({"name": "Upper", "command": "x"}, "name"),
        ({"name": "ok", "command": ""}, "command"),
        ({"name": "ok", "transport": "http", "url": ""}, "url"),
        ({"name": "ok", "command": "x", "env_names": ["TOKEN=abc"]}, "env_names"),
        ({"name": "ok", "command": "x", "agents": "alpha"}, "agents"),
        ({"name": "ok", "command": "x", "call_timeout": 0}, "call_timeout"),
        ({"name": "ok", "command": "x", "read_only_paths": ["relative"]}, "read_only_paths"),
    ]
    for fields, field in cases:
        name = fields.pop("name")
        with pytest.raises(ValidationError) as caught:
            mcp_server_save(actor=None, name=name, discover=False, **{"transport": "stdio", **fields})
        assert field in caught.value.message_dict, (fields, caught.value.message_dict)
    assert not McpServer.objects.exists()


def test_refresh_of_a_disabled_server_says_so(stdio_server):
    stdio_server(enabled=False)
    refresh = mcp_server_refresh(actor=None, name="demo")
    assert refresh.error == "the server is disabled"
