"""read_skill / read_skill_file as catalog tools, and the policy seen through index and tools."""

from __future__ import annotations

import os

import pytest

from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy
from skills_registry.selectors import skill_index_for, skills_visibility_report
from skills_registry.services import (
    skills_set_disabled,
    skills_set_privilege,
    skills_set_subagent_access,
    skills_sync,
)
from tests.support.skills import write_skill
from toolcatalog.protocol import ToolContext, get_tool, run_tool

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture
def registry(skill_env):
    write_skill(
        skill_env.project_skills,
        "lint",
        description="Lint things.",
        body="# Lint\n\nRun scripts/run.sh.",
        files={"scripts/run.sh": "echo lint\n", "logo.png": PNG, "blob.bin": b"\xff\x00\xfe"},
    )
    write_skill(skill_env.project_skills, "deploy", description="Deploy things.")
    write_skill(skill_env.project_skills, "admin-ops", description="Privileged operations.")
    write_skill(skill_env.project_skills, "manual", description="User only.", extra="disable-model-invocation: true")
    write_skill(skill_env.project_skills, "Broken", description="Invalid name.")
    (skill_env.project_skills / "loose.md").write_text("---\nname: skills\ndescription: A loose file skill.\n---\nLoose body\n")
    (skill_env.tmp / "secret.txt").write_text("TOP SECRET")
    os.symlink(skill_env.tmp / "secret.txt", skill_env.project_skills / "lint" / "leak.txt")
    skills_sync()
    skills_set_privilege(skills=SkillResource.objects.filter(name="admin-ops"), requires_privilege=True, actor=None)
    return skill_env


def ctx(env, policy=None, for_subagent=False):
    """The context the runtime builds: the policy parsed, both as typed fields."""
    parsed = SkillPolicy.from_dict(policy) if policy is not None else None
    return ToolContext(roots=(env.tmp,), skill_policy=parsed, for_subagent=for_subagent)


def call(env, name, args, **kw):
    return run_tool(get_tool(name), ctx(env, **kw), args)


def test_tools_are_registered_with_manifests():
    for name in ("read_skill", "read_skill_file"):
        tool = get_tool(name)
        assert tool.manifest.kind == "skill" and tool.manifest.requires_skill_scope
        assert tool.definition()["parameters"]["required"][0] == "name"


def test_tools_in_the_effective_projection():
    from toolcatalog.projection import resolve_tools

    parent = resolve_tools(None, governance={})
    sub = resolve_tools(None, for_subagent=True, governance={})
    no_skills = resolve_tools(None, runtime_policy={"skill_scope": False}, governance={})
    for name in ("read_skill", "read_skill_file"):
        assert parent[name].effective and parent[name].source == "manifest"
        assert sub[name].effective and sub[name].route == "main-process-proxy"
        assert not no_skills[name].effective


def test_read_skill_returns_body_without_frontmatter(registry):
    result = call(registry, "read_skill", {"name": "lint"})
    assert not result.is_error
    assert result.content[0]["text"] == "# Lint\n\nRun scripts/run.sh."
    assert "scripts/run.sh" in result.content[1]["text"] and "leak.txt" not in result.content[1]["text"]
    assert result.details["location"] == str(registry.project_skills / "lint" / "SKILL.md")
    assert result.details["changedSinceSync"] is False
    (registry.project_skills / "lint" / "SKILL.md").write_text("---\ndescription: x\n---\nNew body\n")
    again = call(registry, "read_skill", {"name": "lint"})
    assert again.content[0]["text"] == "New body" and again.details["changedSinceSync"] is True


def test_read_skill_refusals(registry):
    for name in ("nope", "Broken"):
        result = call(registry, "read_skill", {"name": name})
        assert result.is_error and "No skill named" in result.text_output()
    manual = call(registry, "read_skill", {"name": "manual"})
    assert manual.is_error and "/skill:manual" in manual.text_output()
    bad_args = call(registry, "read_skill", {"name": 3})
    assert bad_args.is_error and "Invalid arguments" in bad_args.text_output()

def test_the_policy_and_the_subagent_flag_are_typed_fields(registry):
    with pytest.raises(TypeError, match="parsed skill policy"):
        ToolContext(roots=(registry.tmp,), skill_policy={"allowed": ["deploy"]})  # a dict is not a policy
    with pytest.raises(TypeError, match="for_subagent must be True or False"):
        ToolContext(roots=(registry.tmp,), for_subagent="yes")
    for key, value in (("skill_policy", {}), ("for_subagent", True)):  # the old strings are refused, not ignored
        with pytest.raises(TypeError, match=f"{key}: a typed field of ToolContext"):
            ToolContext(roots=(registry.tmp,), extras={key: value})

    class NamesOnly:  # policy-like, but not the registry's SkillPolicy
        def name_allowed(self, name, *, for_subagent):
            return True, "yes"

    odd = run_tool(get_tool("read_skill"), ToolContext(roots=(registry.tmp,), skill_policy=NamesOnly()), {"name": "lint"})
    assert odd.is_error and "not a SkillPolicy" in odd.text_output()


def test_read_skill_file(registry):
    ok = call(registry, "read_skill_file", {"name": "lint", "path": "scripts/run.sh"})
    assert not ok.is_error and ok.text_output() == "echo lint\n"
    image = call(registry, "read_skill_file", {"name": "lint", "path": "logo.png"})
    assert image.content[1]["type"] == "image" and image.content[1]["mimeType"] == "image/png"
    binary = call(registry, "read_skill_file", {"name": "lint", "path": "blob.bin"})
    assert binary.is_error and "binary" in binary.text_output()
    for path in ("leak.txt", "../deploy/SKILL.md", "/etc/passwd", "scripts/../../deploy/SKILL.md"):
        refused = call(registry, "read_skill_file", {"name": "lint", "path": path})
        assert refused.is_error and "TOP SECRET" not in refused.text_output(), path
        assert "Refused" in refused.text_output()
    loose = call(registry, "read_skill_file", {"name": "skills", "path": "lint/scripts/run.sh"})
    assert loose.is_error and "single file" in loose.text_output()


def test_read_skill_file_size_cap(registry, settings):
    settings.NETA_SKILL_FILE_MAX_BYTES = 5
    result = call(registry, "read_skill_file", {"name": "lint", "path": "scripts/run.sh"})
    assert result.is_error and "limit is 5" in result.text_output()


def test_agent_policy_allowed_list(registry):
    policy = {"allowed": ["deploy"]}
    assert call(registry, "read_skill", {"name": "lint"}, policy=policy).is_error
    assert not call(registry, "read_skill", {"name": "deploy"}, policy=policy).is_error
    index = skill_index_for(policy=SkillPolicy.from_dict(policy))
    assert index.listed == ("deploy",)


def test_subagent_never_sees_non_whitelisted_or_privileged(registry, staff):
    policy = {"allowed": "all", "subagent_allowed": ["lint", "admin-ops", "manual"]}
    parsed = SkillPolicy.from_dict(policy)
    parent_index = skill_index_for(policy=parsed)
    assert set(parent_index.listed) == {"lint", "deploy", "admin-ops", "skills"}
    sub_index = skill_index_for(policy=parsed, for_subagent=True)
    assert sub_index.listed == ("lint",)
    assert "admin-ops" not in sub_index.text and "deploy" not in sub_index.text
    for name in ("deploy", "admin-ops"):
        for tool, args in (("read_skill", {"name": name}), ("read_skill_file", {"name": name, "path": "SKILL.md"})):
            result = call(registry, tool, args, policy=policy, for_subagent=True)
            assert result.is_error, (tool, name)
            assert "No skill named" in result.text_output()  # same answer as for a skill that does not exist
            assert not call(registry, tool, args, policy=policy).is_error  # the parent may
    assert not call(registry, "read_skill", {"name": "lint"}, policy=policy, for_subagent=True).is_error
    # staff deny in subagents: gone from the subagent's index and tools, still there for the parent
    skills_set_subagent_access(skills=SkillResource.objects.filter(name="lint"), allowed=False, actor=staff)
    assert skill_index_for(policy=parsed, for_subagent=True).listed == ()
    assert call(registry, "read_skill", {"name": "lint"}, policy=policy, for_subagent=True).is_error
    assert not call(registry, "read_skill", {"name": "lint"}, policy=policy).is_error
    # a subagent with no policy sees nothing
    assert call(registry, "read_skill", {"name": "lint"}, for_subagent=True).is_error
    report = {row.skill.name: row.reason for row in skills_visibility_report(policy=parsed, for_subagent=True)}
    assert report["admin-ops"].startswith("requires privilege")
    assert report["deploy"] == "not on the subagent whitelist"
    assert report["lint"] == "denied in subagents by staff"


def test_disabled_skill_is_gone_everywhere(registry, staff):
    skills_set_disabled(skills=SkillResource.objects.filter(name="deploy"), disabled=True, actor=staff)
    assert "deploy" not in skill_index_for(policy=SkillPolicy()).listed
    assert call(registry, "read_skill", {"name": "deploy"}).is_error


def test_index_location_is_readable_by_pis_way(registry):
    """The <location> is the absolute SKILL.md path, so an agent with `read` can open it."""
    index = skill_index_for(policy=SkillPolicy.from_dict({"allowed": ["lint"]}))
    location = str(registry.project_skills / "lint" / "SKILL.md")
    assert f"<location>{location}</location>" in index.text
    assert os.path.isfile(location)


def test_pis_way_with_the_read_tool(registry):
    """With `read`, the model opens <location> itself when the skill lies in its workspace."""
    location = str(registry.project_skills / "lint" / "SKILL.md")
    inside = run_tool(get_tool("read"), ToolContext(roots=(registry.project,)), {"path": location})
    assert not inside.is_error and "Run scripts/run.sh." in inside.text_output()
    elsewhere = registry.tmp / "other-workspace"
    elsewhere.mkdir()
    outside = run_tool(get_tool("read"), ToolContext(roots=(elsewhere,)), {"path": location})
    assert outside.is_error  # outside the workspace: read_skill is the way
    assert not run_tool(get_tool("read_skill"), ToolContext(roots=(elsewhere,)), {"name": "lint"}).is_error
