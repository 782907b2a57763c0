"""The system prompt: agent prompt, tool hints, skill index, date and cwd, in that order."""

from __future__ import annotations

import datetime as dt

import pytest

from runtime.agents.system_prompt import DEFAULT_PROMPT, build_system_prompt
from runtime.models import Agent, ModelConfig
from skills_registry.services import skills_sync
from toolcatalog.projection import resolve_tools

pytestmark = pytest.mark.django_db


def make_agent(**fields) -> Agent:
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="m")
    return Agent.objects.create(name="a", model=model, **fields)


def write_skill(root, name, description):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")


def test_order_and_content(tmp_path, settings):
    skills_root = tmp_path / "skills"
    write_skill(skills_root, "pdf-tools", "Work with PDF files & forms")
    settings.NETA_SKILLS_DIRS = [str(skills_root)]
    skills_sync(cwd=tmp_path / "project", home=tmp_path / "home")
    agent = make_agent(
        system_prompt="You are Fib, a careful engineer.",
        tool_policy={"per_tool": {"grep": {"prompt_hint": "Prefer grep over bash for searching."}}},
    )
    projection = resolve_tools(agent.tool_policy)
    text = build_system_prompt(agent, projection, cwd="/work/proj", today=dt.date(2026, 11, 30))
    assert text.startswith("You are Fib, a careful engineer.\n\nTool guidelines:\n- grep: Prefer grep over bash for searching.")
    assert "<available_skills>" in text and "<name>pdf-tools</name>" in text
    assert "Work with PDF files &amp; forms" in text
    assert text.index("Tool guidelines") < text.index("<available_skills>")
    assert text.endswith("\nCurrent date: 2026-11-30\nCurrent working directory: /work/proj")


def test_skill_tools_alone_bring_the_index(tmp_path, settings):
    skills_root = tmp_path / "skills"
    write_skill(skills_root, "pdf-tools", "PDF")
    settings.NETA_SKILLS_DIRS = [str(skills_root)]
    skills_sync(cwd=tmp_path / "project", home=tmp_path / "home")
    agent = make_agent(tool_policy={"inherit_core_tools": False})
    projection = resolve_tools(agent.tool_policy)
    assert "read" not in projection.effective_names() and "read_skill" in projection.effective_names()
    text = build_system_prompt(agent, projection, cwd="/w", today=dt.date(2026, 1, 2))
    assert "read_skill tool" in text and "<name>pdf-tools</name>" in text


def test_no_read_tool_means_no_skill_index(tmp_path, settings):
    skills_root = tmp_path / "skills"
    write_skill(skills_root, "pdf-tools", "PDF")
    settings.NETA_SKILLS_DIRS = [str(skills_root)]
    skills_sync(cwd=tmp_path / "project", home=tmp_path / "home")
    agent = make_agent(tool_policy={"inherit_core_tools": False, "disabled": ["read_skill", "read_skill_file"]})
    projection = resolve_tools(agent.tool_policy)
    assert not {"read", "read_skill"} & set(projection.effective_names())
    text = build_system_prompt(agent, projection, cwd="/w", today=dt.date(2026, 1, 2))
    assert "<available_skills>" not in text
    assert text == f"{DEFAULT_PROMPT}\nCurrent date: 2026-01-02\nCurrent working directory: /w"


def test_a_runs_instructions_follow_the_agents_prompt():
    agent = make_agent(system_prompt="You are Fib.", tool_policy={"per_tool": {"grep": {"prompt_hint": "Prefer grep."}}})
    projection = resolve_tools(agent.tool_policy)
    text = build_system_prompt(agent, projection, cwd="/w", today=dt.date(2026, 1, 2), instructions="  Answer in French.\n")
    assert text.startswith("You are Fib.\n\nAnswer in French.\n\nTool guidelines:\n- grep: Prefer grep.")
    assert build_system_prompt(agent, projection, cwd="/w", today=dt.date(2026, 1, 2), instructions="   ") == build_system_prompt(
        agent, projection, cwd="/w", today=dt.date(2026, 1, 2)
    )
