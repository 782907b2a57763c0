"""Agent tool policy: strict validation naming the field, canonical round trip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcatalog.policy import PerToolPolicy, PolicyError, ToolPolicy, validate_policy

CORE = ["read", "bash", "edit", "write", "grep", "find", "ls"]


def test_defaults():
    assert ToolPolicy.from_dict(None) == ToolPolicy()
    assert ToolPolicy.from_dict({}).to_dict() == {
        "inherit_core_tools": True,
        "enabled": [],
        "disabled": [],
        "per_tool": {},
        "env_passthrough": [],
        "network": False,
        "approval": "auto",
    }


def test_approval_mode_is_one_of_the_modes():
    assert ToolPolicy.from_dict({"approval": "plan_only"}).approval == "plan_only"
    with pytest.raises(PolicyError) as info:
        ToolPolicy.from_dict({"approval": "sometimes"})
    assert "approval" in info.value.as_dict()


def test_full_policy_round_trip():
    data = {
        "inherit_core_tools": False,
        "enabled": ["read", "grep", "read"],
        "disabled": ["bash"],
        "per_tool": {
            "grep": {"enabled": True, "prompt_hint": "Prefer grep.", "allow_in_subagent": False,
                     "worker_routing": "main-process-proxy"},
        },
        "env_passthrough": ["GITHUB_TOKEN"],
        "network": True,
    }
    policy = ToolPolicy.from_dict(data)
    assert policy.enabled == ("read", "grep")  # duplicates folded
    assert policy.per_tool["grep"] == PerToolPolicy(True, "Prefer grep.", False, "main-process-proxy")
    assert ToolPolicy.from_dict(policy.to_dict()) == policy
    assert validate_policy(data) == policy.to_dict()


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([], "policy", "must be an object, got list"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"inherit_core_tools": "yes"}, "inherit_core_tools", "must be true or false, not 'yes'"),
        ({"network": 1}, "network", "must be true or false, not 1"),
        ({"enabled": "read"}, "enabled", "must be a list of tool names, not str"),
        ({"enabled": ["read", "nope"]}, "enabled[1]", "unknown tool 'nope'"),
        ({"disabled": [3]}, "disabled[0]", "must be a tool name (string), not 3"),
        ({"enabled": ["bash"], "disabled": ["bash"]}, "disabled[0]", "'bash' is also listed in enabled"),
        ({"per_tool": []}, "per_tool", "must be an object keyed by tool name, not list"),
        ({"per_tool": {"nope": {}}}, "per_tool.nope", "unknown tool 'nope'"),
        ({"per_tool": {"bash": True}}, "per_tool.bash", "must be an object, not bool"),
        ({"per_tool": {"bash": {"colour": 1}}}, "per_tool.bash.colour", "unknown field"),
        ({"per_tool": {"bash": {"enabled": "no"}}}, "per_tool.bash.enabled", "must be true, false or null, not 'no'"),
        ({"per_tool": {"bash": {"allow_in_subagent": 0}}}, "per_tool.bash.allow_in_subagent",
         "must be true, false or null, not 0"),
        ({"per_tool": {"bash": {"prompt_hint": 5}}}, "per_tool.bash.prompt_hint", "must be a string, not int"),
        ({"per_tool": {"bash": {"prompt_hint": "x" * 5000}}}, "per_tool.bash.prompt_hint",
         "is 5000 characters long (limit 4000)"),
        ({"per_tool": {"bash": {"prompt_hint": "bad \ud800"}}}, "per_tool.bash.prompt_hint", "lone surrogate"),
        ({"per_tool": {"bash": {"worker_routing": "cloud"}}}, "per_tool.bash.worker_routing",
         "must be one of worker-local, main-process-proxy, disabled, not 'cloud'"),
        ({"enabled": ["bash"], "per_tool": {"bash": {"enabled": False}}}, "per_tool.bash.enabled",
         "false contradicts enabled"),
        ({"disabled": ["bash"], "per_tool": {"bash": {"enabled": True}}}, "per_tool.bash.enabled",
         "true contradicts disabled"),
        ({"env_passthrough": "HOME"}, "env_passthrough", "must be a list of variable names, not str"),
        ({"env_passthrough": ["OK_NAME", "bad name"]}, "env_passthrough[1]", "not an environment variable name"),
        ({"env_passthrough": [f"V{i}" for i in range(70)]}, "env_passthrough", "lists 70 variables (limit 64)"),
    ],
)
def test_bad_policies_name_the_field(data, field, message):
    with pytest.raises(PolicyError) as info:
        ToolPolicy.from_dict(data)
    assert any(where == field and message in msg for where, msg in info.value.errors), info.value.errors
    assert f"{field}: " in str(info.value)


def test_all_errors_are_reported_at_once():
    with pytest.raises(PolicyError) as info:
        ToolPolicy.from_dict({"enabled": ["x"], "network": "no", "per_tool": {"y": {}}})
    assert {where for where, _ in info.value.errors} == {"enabled[0]", "network", "per_tool.y"}
    assert info.value.as_dict()["network"] == ["must be true or false, not 'no'"]


def test_route_the_manifest_forbids_is_rejected():
    from toolcatalog.manifest import ToolManifest
    from toolcatalog.protocol import Tool, register_tool, unregister_tool

    class MainOnly(Tool):
        name = "test_main_only"
        manifest = ToolManifest(kind="extension", supported_in_worker=False, default_route="main-process-proxy")

    register_tool(MainOnly())
    try:
        with pytest.raises(PolicyError, match="per_tool.test_main_only.worker_routing: 'test_main_only' cannot run"):
            ToolPolicy.from_dict({"per_tool": {"test_main_only": {"worker_routing": "worker-local"}}})
    finally:
        unregister_tool("test_main_only")


def test_unknown_names_can_be_ignored_for_stored_policies():
    from toolcatalog.policy import parse_policy

    policy, ignored = parse_policy({"enabled": ["gone", "read"], "per_tool": {"gone2": {}}}, unknown_tools="ignore")
    assert policy.enabled == ("read",) and ignored == ["gone", "gone2"]


names = st.sampled_from(CORE)
per_tool_st = st.builds(
    dict,
    enabled=st.sampled_from([None, True]),
    prompt_hint=st.one_of(st.none(), st.text(max_size=20)),
    allow_in_subagent=st.sampled_from([None, True, False]),
    worker_routing=st.sampled_from([None, "worker-local", "main-process-proxy", "disabled"]),
)


@settings(max_examples=150, deadline=None)
@given(
    st.booleans(),
    st.lists(names, max_size=4),
    st.dictionaries(names, per_tool_st, max_size=3),
    st.lists(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), max_size=3),
    st.booleans(),
)
def test_round_trip_property(inherit, enabled, per_tool, passthrough, network):
    data = {"inherit_core_tools": inherit, "enabled": enabled, "per_tool": per_tool,
            "env_passthrough": passthrough, "network": network}
    policy = ToolPolicy.from_dict(data)
    assert ToolPolicy.from_dict(policy.to_dict()) == policy
    assert validate_policy(policy.to_dict()) == policy.to_dict()
