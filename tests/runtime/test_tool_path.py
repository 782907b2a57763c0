"""One tool-execution path: the turn loop runs every call through the agent's effective
projection (``runtime.agents.tools``), and the skill policy and subagent flag reach the
skill tools as typed fields of the context."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.agents.system_prompt import skill_index_text
from runtime.agents.tools import agent_tool_projection, agent_tools
from runtime.models import RunStatus
from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy
from skills_registry.services import skills_set_privilege, skills_sync
from sessions_tree.providers import get_provider
from tests.support.rules import rules
from toolcatalog.services import tool_config_update

pytestmark = pytest.mark.django_db(transaction=True)


def tool_results(driver) -> list[dict]:
    messages = get_provider(driver.agent.session_provider).build_context(driver.session_id).messages
    return [m for m in messages if m["role"] == "toolResult"]


def calls(*tool_calls) -> dict:
    """A script: on "go", call the tools in one round, then say done."""
    return rules(
        {
            "match": {"contains": "go"},
            "replies": [[{"tool_call": {"name": n, "arguments": a}} for n, a in tool_calls], [{"text": "done"}]],
        }
    )


@pytest.fixture
def skills(tmp_path, settings):
    """Three skills in a workspace root: one ordinary, one for subagents, one privileged."""
    root = tmp_path / "skill-root"
    for name in ("deploy", "lint", "admin-ops"):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill.\n---\n# {name} body\n")
    settings.NETA_SKILLS_DIRS = [str(root)]
    settings.NETA_SKILLS_PROJECT_DIR = str(tmp_path / "no-project")
    settings.NETA_SKILLS_HOME = str(tmp_path / "no-home")
    skills_sync(cwd=tmp_path / "no-project", home=tmp_path / "no-home")
    skills_set_privilege(skills=SkillResource.objects.filter(name="admin-ops"), requires_privilege=True, actor=None)
    return root


def test_a_tool_staff_governance_disables_is_refused_with_the_projections_reason(driver_for, staff, workspace):
    tool_config_update(actor=staff, name="bash", enabled=False)
    driver = driver_for(calls(("bash", {"command": "touch made-by-bash"}), ("ls", {})))
    decision = agent_tool_projection(driver.agent)["bash"]
    assert not decision.effective
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    refused, listed = tool_results(driver)
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == f"Tool 'bash' is not available: {decision.reason}"
    assert not list(workspace.rglob("made-by-bash"))  # it never ran
    assert listed["isError"] is False  # the same round's effective tool did


def test_a_tool_the_model_invents_is_refused(driver_for):
    driver = driver_for(calls(("no_such_tool", {"x": 1})))
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    (result,) = tool_results(driver)
    assert result["isError"] is True and result["content"][0]["text"] == "Unknown tool 'no_such_tool'"


def test_the_policy_s_network_flag_is_parsed_not_read_raw(make_agent):
    agent = make_agent(rules(), tool_policy={"env_passthrough": ["GITHUB_TOKEN"], "network": True})
    tools = agent_tools(agent)
    ctx = tools.context(roots=[agent.cwd], cwd=agent.cwd)
    assert ctx.network is True and ctx.env_passthrough == ("GITHUB_TOKEN",)
    assert ctx.skill_policy == SkillPolicy() and ctx.for_subagent is False and ctx.extras == {}


def test_read_skill_in_a_run_sees_the_agent_s_typed_skill_policy(driver_for, skills):
    driver = driver_for(
        calls(("read_skill", {"name": "deploy"}), ("read_skill", {"name": "lint"})),
        tool_policy={"enabled": ["read_skill"]},
        skill_policy={"allowed": ["deploy"]},
    )
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    allowed, refused = tool_results(driver)
    assert allowed["isError"] is False and allowed["content"][0]["text"] == "# deploy body"
    assert refused["isError"] is True and "No skill named 'lint'" in refused["content"][0]["text"]


def test_for_subagent_hides_privileged_and_unlisted_skills(make_agent, skills):
    agent = make_agent(rules(), skill_policy={"allowed": "all", "subagent_allowed": ["lint", "admin-ops"]})
    parent, child = agent_tools(agent), agent_tools(agent, for_subagent=True)
    assert child.projection.for_subagent and child.for_subagent and not parent.for_subagent
    parent_ctx = parent.context(roots=[agent.cwd], cwd=agent.cwd)
    child_ctx = child.context(roots=[agent.cwd], cwd=agent.cwd)
    assert child_ctx.for_subagent is True and parent_ctx.for_subagent is False
    for name in ("deploy", "lint", "admin-ops"):
        assert not parent.execute("read_skill", {"name": name}, parent_ctx).is_error, name
    assert not child.execute("read_skill", {"name": "lint"}, child_ctx).is_error
    for name in ("admin-ops", "deploy"):  # privileged; not on the subagent whitelist
        result = child.execute("read_skill", {"name": name}, child_ctx)
        assert result.is_error and f"No skill named {name!r}" in result.text_output()
    # The index a subagent's prompt shows follows its projection's flag too.
    child_index, parent_index = skill_index_text(agent, child.projection), skill_index_text(agent, parent.projection)
    assert "<name>lint</name>" in child_index and "admin-ops" not in child_index and "deploy" not in child_index
    assert "<name>admin-ops</name>" in parent_index and "<name>deploy</name>" in parent_index


def test_a_subagent_projection_refuses_what_subagents_may_not_call(make_agent, staff):
    agent = make_agent(rules())
    tool_config_update(actor=staff, name="write", allow_in_subagent=False)
    child = agent_tools(agent, for_subagent=True)
    ctx = child.context(roots=[agent.cwd], cwd=agent.cwd)
    result = child.execute("write", {"path": "x.txt", "content": "x"}, ctx)
    assert result.is_error and "not allowed in subagents by staff governance" in result.text_output()
    assert not Path(agent.cwd, "x.txt").exists()
    parent = agent_tools(agent)
    assert not parent.execute("write", {"path": "x.txt", "content": "x"}, parent.context(roots=[agent.cwd], cwd=agent.cwd)).is_error
