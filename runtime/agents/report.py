"""What the console shows about an agent: usable or not and why, its effective tools and
skills (as itself and as a subagent) with the reasons, and warnings. Reads only; the list
page builds every row from one read of the tool governance rows and the skill rows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runtime.agents.specs import model_spec
from runtime.agents.subagent_policy import SubagentPolicy, SubagentPolicyError
from runtime.agents.tools import agent_tool_projection
from runtime.llm.thinking import clamp_thinking
from runtime.models import Agent, LlmProviderKind, ModelConfig
from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy, SkillPolicyError
from skills_registry.selectors import skill_visibility
from toolcatalog.policy import PolicyError, parse_policy
from toolcatalog.projection import ToolProjection, governance_rules
from toolcatalog.protocol import tool_names

SKILL_LOADERS = ("read_skill", "read")


@dataclass(frozen=True)
class SkillLine:
    name: str
    scope: str
    status: str
    visible: bool
    reason: str


@dataclass
class AgentReport:
    agent: Agent
    usable: bool
    tools: ToolProjection | None
    subagent_tools: ToolProjection | None
    skills: list[SkillLine] = field(default_factory=list)
    subagent_skills: list[SkillLine] = field(default_factory=list)
    subagent_policy: SubagentPolicy | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def tool_count(self) -> int:
        return len(self.tools.effective_names()) if self.tools else 0

    @property
    def skill_count(self) -> int:
        return sum(1 for s in self.skills if s.visible)

    @property
    def subagents_enabled(self) -> bool:
        return bool(self.subagent_policy and self.subagent_policy.enabled)


def model_problems(model) -> list[str]:
    """Why runs of an agent with ``model`` fail or run crippled (empty: it is usable)."""
    problems = []
    if not model.enabled:
        problems.append(f"the model {model.name!r} is disabled: runs of this agent fail")
    if model.provider_kind != LlmProviderKind.SCRIPTED:
        if not model.api_key_env:
            problems.append(f"the model {model.name!r} names no API key variable")
        elif not model.key_is_set:
            problems.append(f"the model {model.name!r} needs {model.api_key_env}, which is not set in this process")
    return problems


def thinking_and_fallback_warnings(agent: Agent) -> list[str]:
    """The agent's thinking level as its model takes it (clamped: docs/llm.md), and fallback
    models a failover would skip now (gone, disabled, no key). No query without fallbacks."""
    warnings = []
    # A list page loads its rows without their JSON columns (sessions_tree/admin_lists.py) and
    # shows no warnings: what a row did not load is not read here (no query per row).
    if "options" not in agent.model.get_deferred_fields():
        clamp = clamp_thinking(model_spec(agent.model, for_call=False), agent.thinking_level)
        if clamp.changed:
            warnings.append(f"the thinking level is clamped for runs: {clamp.describe(agent.model.name)}")
    if "fallback_models" in agent.get_deferred_fields():
        return warnings
    names = [n for n in agent.fallback_models or [] if isinstance(n, str)]
    if names:
        rows = {m.name: m for m in ModelConfig.objects.filter(name__in=names)}
        for name in names:
            row = rows.get(name)
            if row is None:
                warnings.append(f"the fallback model {name!r} does not exist: failover skips it")
            else:
                warnings += [f"{p.replace('runs of this agent fail', 'failover skips it')} (a fallback)" for p in model_problems(row)]
    return warnings


def _skill_lines(agent_policy: SkillPolicy, rows, *, for_subagent: bool, loader: bool) -> list[SkillLine]:
    lines = []
    for row in rows:
        visible, reason = skill_visibility(skill=row, policy=agent_policy, for_subagent=for_subagent)
        if visible and not loader:
            visible, reason = False, "allowed, but no skill tool (read or read_skill) is effective to load it"
        lines.append(SkillLine(row.name, row.scope, row.status, visible, reason))
    return lines


def agent_report(agent: Agent, *, governance=None, skills=None, agents: dict[str, bool] | None = None, known_tools=None) -> AgentReport:
    """The whole report for one agent. ``governance``, ``skills`` (the rows), ``agents``
    (name → enabled) and ``known_tools``: read once by a list page for all its rows."""
    governance = governance_rules() if governance is None else governance
    if skills is None:
        skills = list(skill_rows())
    if agents is None:
        agents = dict(Agent.objects.values_list("name", "enabled"))
    known_tools = set(tool_names()) if known_tools is None else known_tools
    warnings: list[str] = []
    if not agent.enabled:
        warnings.append("the agent is disabled: no new session or run may use it")
    problems = model_problems(agent.model)
    warnings += problems
    if not agent.model.supports_tools:
        warnings.append(f"the model {agent.model.name!r} does not support tool calls: the agent runs without tools")
    warnings += thinking_and_fallback_warnings(agent)

    tools = subagent_tools = None
    try:
        _, ignored = parse_policy(agent.tool_policy or {}, unknown_tools="ignore")
        warnings += [f"the tool policy names a missing tool {name!r} (ignored; saving the tool editor removes it)" for name in ignored]
        tools = agent_tool_projection(agent, governance=governance)
        subagent_tools = agent_tool_projection(agent, for_subagent=True, governance=governance)
    except PolicyError as exc:
        warnings.append(f"invalid tool policy: {exc}")

    sub_policy = None
    try:
        sub_policy = SubagentPolicy.from_dict(agent.subagent_policy)
        for name in sub_policy.agents:
            if name not in agents:
                warnings.append(f"the subagent policy names a missing agent {name!r}")
            elif not agents[name]:
                warnings.append(f"the subagent policy names the disabled agent {name!r}")
        for name in (*(sub_policy.tools_allow or ()), *sub_policy.tools_deny):
            if name not in known_tools:
                warnings.append(f"the subagent policy names a missing tool {name!r}")
    except SubagentPolicyError as exc:
        warnings.append(f"invalid subagent policy: {exc}")

    skill_lines: list[SkillLine] = []
    sub_lines: list[SkillLine] = []
    try:
        policy = SkillPolicy.from_dict(agent.skill_policy or {})
        loader = bool(tools) and any(n in tools.effective_names() for n in SKILL_LOADERS)
        sub_loader = bool(subagent_tools) and any(n in subagent_tools.effective_names() for n in SKILL_LOADERS)
        skill_lines = _skill_lines(policy, skills, for_subagent=False, loader=loader)
        sub_lines = _skill_lines(policy, skills, for_subagent=True, loader=sub_loader)
        registered = {row.name for row in skills}
        named = set(policy.allowed if policy.allowed != "all" else ()) | set(policy.subagent_allowed)
        warnings += [f"the skill policy names a skill that is not registered: {name!r}" for name in sorted(named - registered)]
    except SkillPolicyError as exc:
        warnings.append(f"invalid skill policy: {exc}")
    if tools is not None:
        warnings += list(tools.warnings)
    return AgentReport(
        agent=agent, usable=not problems and agent.enabled, tools=tools, subagent_tools=subagent_tools,
        skills=skill_lines, subagent_skills=sub_lines, subagent_policy=sub_policy, warnings=warnings,
    )  # fmt: skip


def skill_rows():
    """The registered skills with the columns visibility needs (no files, metadata or text)."""
    return SkillResource.objects.only(
        "id", "name", "scope", "status", "disabled", "allow_in_subagent", "requires_privilege", "discovery_order"
    ).order_by("discovery_order", "id")


def agent_reports(agents: Iterable[Agent]) -> dict[int, AgentReport]:
    """Reports for many agents (a list page): the governance rows, the skills and the agent
    names are read once, whatever the number of agents."""
    governance = governance_rules()
    skills = list(skill_rows())
    names = dict(Agent.objects.values_list("name", "enabled"))
    known = set(tool_names())
    return {a.pk: agent_report(a, governance=governance, skills=skills, agents=names, known_tools=known) for a in agents}
