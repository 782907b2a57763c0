"""The effective tool projection: policy × governance × manifest × runtime × subagent, table-driven."""

from __future__ import annotations

import pytest

from toolcatalog.manifest import ToolManifest
from toolcatalog.projection import GovernanceRule, RuntimePolicy, resolve_tools
from toolcatalog.protocol import Tool, register_tool, unregister_tool


class ExtTool(Tool):
    name = "t_ext"
    label = "Ext"
    description = "an extension tool"
    manifest = ToolManifest(kind="extension")


class SkillTool(Tool):
    name = "t_skill"
    description = "a skill tool"
    manifest = ToolManifest(kind="skill", requires_skill_scope=True)


class MainOnlyTool(Tool):
    name = "t_mainonly"
    description = "needs the main process"
    manifest = ToolManifest(kind="extension", supported_in_worker=False, default_route="main-process-proxy")


@pytest.fixture(autouse=True)
def test_tools():
    tools = [register_tool(ExtTool()), register_tool(SkillTool()), register_tool(MainOnlyTool())]
    yield
    for tool in tools:
        unregister_tool(tool.name)


G = GovernanceRule

# id, policy, governance, runtime, for_subagent, tool, effective, route, source, reason
CASES = [
    ("default core tool", {}, {}, None, False, "read", True, "worker-local", "manifest", ""),
    ("default shell tool", {}, {}, None, False, "bash", True, "worker-local", "manifest", ""),
    ("extension off by default", {}, {}, None, False, "t_ext", False, "worker-local", "manifest",
     "extension tools are off unless the agent enables them"),
    ("extension enabled by list", {"enabled": ["t_ext"]}, {}, None, False, "t_ext", True, "worker-local",
     "agent_policy", ""),
    ("extension enabled per tool", {"per_tool": {"t_ext": {"enabled": True}}}, {}, None, False, "t_ext", True,
     "worker-local", "agent_policy", ""),
    ("skill tool on by default", {}, {}, None, False, "t_skill", True, "worker-local", "manifest", ""),
    ("skill tool without skill scope", {}, {}, {"skill_scope": False}, False, "t_skill", False, "worker-local",
     "runtime_policy", "needs a skill scope, and this run has no skills"),
    ("core not inherited", {"inherit_core_tools": False}, {}, None, False, "read", False, "worker-local",
     "agent_policy", "core tools are not inherited (inherit_core_tools is false)"),
    ("core not inherited but enabled", {"inherit_core_tools": False, "enabled": ["read"]}, {}, None, False, "read",
     True, "worker-local", "agent_policy", ""),
    ("disabled list", {"disabled": ["bash"]}, {}, None, False, "bash", False, "worker-local", "agent_policy",
     "listed in the agent's disabled tools"),
    ("per tool disabled", {"per_tool": {"bash": {"enabled": False}}}, {}, None, False, "bash", False, "worker-local",
     "agent_policy", "disabled by the agent's per_tool setting"),
    ("governance disables", {}, {"bash": G(enabled=False)}, None, False, "bash", False, "worker-local", "governance",
     "disabled by staff governance (ToolConfig)"),
    ("governance is a ceiling", {"enabled": ["bash"]}, {"bash": G(enabled=False)}, None, False, "bash", False,
     "worker-local", "governance", "disabled by staff governance (ToolConfig)"),
    ("runtime without shell", {}, {}, {"allow_shell": False}, False, "bash", False, "worker-local", "runtime_policy",
     "needs a shell, and this run does not allow shell commands"),
    ("runtime without shell keeps read", {}, {}, {"allow_shell": False}, False, "read", True, "worker-local",
     "manifest", ""),
    ("runtime read-only blocks write", {}, {}, {"allow_write": False}, False, "write", False, "worker-local",
     "runtime_policy", "writes files, and this run is read-only"),
    ("runtime read-only blocks edit", {}, {}, {"allow_write": False}, False, "edit", False, "worker-local",
     "runtime_policy", "writes files, and this run is read-only"),
    ("runtime read-only blocks bash", {}, {}, {"allow_write": False}, False, "bash", False, "worker-local",
     "runtime_policy", "writes files, and this run is read-only"),
    ("runtime denial with reason", {}, {}, {"denied": {"grep": "the model cannot call tools"}}, False, "grep", False,
     "worker-local", "runtime_policy", "the model cannot call tools"),
    ("runtime beats agent enabling", {"enabled": ["t_ext"]}, {}, {"denied": {"t_ext": "not here"}}, False, "t_ext",
     False, "worker-local", "runtime_policy", "not here"),
    ("governance reported before runtime", {}, {"bash": G(enabled=False)}, {"allow_shell": False}, False, "bash",
     False, "worker-local", "governance", "disabled by staff governance (ToolConfig)"),
    ("subagent default", {}, {}, None, True, "read", True, "worker-local", "manifest", ""),
    ("subagent governance forbids", {}, {"read": G(allow_in_subagent=False)}, None, True, "read", False,
     "worker-local", "governance", "not allowed in subagents by staff governance"),
    ("subagent agent forbids", {"per_tool": {"read": {"allow_in_subagent": False}}}, {}, None, True, "read", False,
     "worker-local", "agent_policy", "not allowed in subagents by the agent's policy"),
    ("allow_in_subagent is only for subagents", {"per_tool": {"read": {"allow_in_subagent": False}}}, {}, None,
     False, "read", True, "worker-local", "manifest", ""),
    ("subagent agent route disabled", {"per_tool": {"read": {"worker_routing": "disabled"}}}, {}, None, True, "read",
     False, "disabled", "agent_policy", "worker routing is 'disabled'"),
    ("subagent governance route disabled", {}, {"grep": G(worker_routing="disabled")}, None, True, "grep", False,
     "disabled", "governance", "worker routing is 'disabled' by staff governance"),
    ("agent cannot lift governance route disabled", {"per_tool": {"grep": {"worker_routing": "main-process-proxy"}}},
     {"grep": G(worker_routing="disabled")}, None, True, "grep", False, "main-process-proxy", "governance",
     "worker routing is 'disabled' by staff governance"),
    ("agent route beats governance route", {"per_tool": {"grep": {"worker_routing": "worker-local"}}},
     {"grep": G(worker_routing="main-process-proxy")}, None, True, "grep", True, "worker-local", "manifest", ""),
    ("governance route", {}, {"grep": G(worker_routing="main-process-proxy")}, None, True, "grep", True,
     "main-process-proxy", "manifest", ""),
    ("route disabled does not block the main agent", {"per_tool": {"read": {"worker_routing": "disabled"}}}, {},
     None, False, "read", True, "disabled", "manifest", ""),
    ("main-only tool proxied in subagent", {"enabled": ["t_mainonly"]}, {}, None, True, "t_mainonly", True,
     "main-process-proxy", "agent_policy", ""),
    ("main-only tool with a bad worker-local row", {"enabled": ["t_mainonly"]},
     {"t_mainonly": G(worker_routing="worker-local")}, None, True, "t_mainonly", False, "worker-local", "manifest",
     "cannot run inside a worker process, and its route is 'worker-local'"),
    ("main-only tool in main agent", {"enabled": ["t_mainonly"]}, {}, None, False, "t_mainonly", True,
     "main-process-proxy", "agent_policy", ""),
    ("subagent disabled tool reports the agent", {"disabled": ["bash"]}, {"bash": G(allow_in_subagent=False)}, None,
     True, "bash", False, "worker-local", "agent_policy", "listed in the agent's disabled tools"),
]


@pytest.mark.parametrize(
    ("policy", "governance", "runtime", "for_subagent", "tool", "effective", "route", "source", "reason"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_projection_table(policy, governance, runtime, for_subagent, tool, effective, route, source, reason):
    projection = resolve_tools(policy, for_subagent=for_subagent, runtime_policy=runtime, governance=governance)
    decision = projection[tool]
    assert (decision.effective, decision.route, decision.source, decision.reason) == (effective, route, source, reason)
    assert (tool in projection.effective_names()) == effective


def test_every_known_tool_gets_exactly_one_decision():
    projection = resolve_tools({}, governance={})
    names = [d.name for d in projection]
    assert len(names) == len(set(names))
    assert names[:7] == ["read", "bash", "edit", "write", "grep", "find", "ls"]
    assert {"t_ext", "t_skill", "t_mainonly"} <= set(names)
    assert all(d.reason == "" for d in projection if d.effective)
    assert all(d.reason for d in projection if not d.effective)


def test_overrides_hints_and_definitions():
    governance = {
        "grep": G(label="Search", description="Search the code.", prompt_hint="Use grep first.", renderer_key="matches"),
        "read": G(prompt_hint="Read before editing."),
    }
    policy = {"per_tool": {"read": {"prompt_hint": "Always read whole files."}}, "disabled": ["bash"]}
    projection = resolve_tools(policy, governance=governance)
    grep = projection["grep"]
    assert (grep.label, grep.description, grep.prompt_hint, grep.renderer) == (
        "Search", "Search the code.", "Use grep first.", "matches")
    assert projection["read"].prompt_hint == "Always read whole files."  # the agent's hint wins
    assert projection["ls"].renderer == "ls"
    assert projection.prompt_hints() == {"read": "Always read whole files.", "grep": "Use grep first."}
    definitions = {d["name"]: d for d in projection.tool_definitions()}
    assert "bash" not in definitions
    assert definitions["grep"]["description"] == "Search the code."
    assert definitions["grep"]["parameters"]["required"] == ["pattern"]
    with pytest.raises(KeyError, match="listed in the agent's disabled tools"):
        projection.tool("bash")
    assert projection.tool("grep").name == "grep"


def test_json_shape():
    data = resolve_tools({"disabled": ["bash"]}, governance={}).to_dict()
    assert data["forSubagent"] is False and data["warnings"] == []
    bash = next(t for t in data["tools"] if t["name"] == "bash")
    assert bash == {
        "name": "bash",
        "label": "bash",
        "description": bash["description"],
        "kind": "builtin",
        "effective": False,
        "route": "worker-local",
        "routeSource": "manifest",
        "source": "agent_policy",
        "reason": "listed in the agent's disabled tools",
        "promptHint": "",
        "renderer": "bash",
        "manifest": {"kind": "builtin", "execution_mode": "subprocess", "supported_in_worker": True,
                     "requires_shell": True, "requires_write": True, "requires_skill_scope": False, "requires_network": False,
                     "default_route": "worker-local"},
    }


def test_stale_names_become_warnings_not_failures():
    projection = resolve_tools(
        {"enabled": ["removed_tool"]},
        governance={"old_tool": G(enabled=False)},
        runtime_policy=RuntimePolicy(denied={"ghost": "x"}),
    )
    assert projection.warnings == (
        "agent policy names unknown tool 'removed_tool' (ignored)",
        "governance row for unknown tool 'old_tool' (ignored)",
        "runtime policy denies unknown tool 'ghost' (ignored)",
    )


def test_bad_runtime_policy_names_the_field():
    from toolcatalog.policy import PolicyError

    with pytest.raises(PolicyError, match="runtime_policy.allow_shell: must be true or false"):
        resolve_tools({}, runtime_policy={"allow_shell": "no"}, governance={})
    with pytest.raises(PolicyError, match="runtime_policy.colour: unknown field"):
        resolve_tools({}, runtime_policy={"colour": 1}, governance={})
