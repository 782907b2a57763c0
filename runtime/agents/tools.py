"""An agent's tools for one run: the effective projection, and the one way a call runs.

The turn loop asks ``agent_tools(agent)`` once per run; a subagent's host asks
``agent_tools(agent, for_subagent=True)``. What comes back holds the agent's parsed
tool policy, its parsed skill policy and the effective projection
(``toolcatalog.projection.resolve_tools``: nothing here re-derives a decision), and
builds each call's context through ``toolcatalog.services.tool_context_build`` and
runs it through ``toolcatalog.services.tool_execute`` (refused unless the projection
makes the tool effective). The subagent flag travels from the projection to the
context (``ToolContext.for_subagent``) and the skill policy as a typed field
(``ToolContext.skill_policy``), so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.agents.subagent_policy import DELEGATE_TOOLS, effective_tool_policy
from skills_registry.policy import SkillPolicy
from toolcatalog.policy import ToolPolicy, parse_policy
from toolcatalog.projection import ToolProjection, resolve_tools
from toolcatalog.protocol import CancelSignal, ToolContext, ToolResult
from toolcatalog.services import tool_context_build, tool_execute


@dataclass(frozen=True)
class AgentTools:
    """What one run (or one subagent) may call, and how each call is made."""

    projection: ToolProjection
    tool_policy: ToolPolicy
    skill_policy: SkillPolicy

    @property
    def for_subagent(self) -> bool:
        return self.projection.for_subagent

    def context(
        self,
        *,
        roots: Sequence[str],
        cwd: str | None,
        cancel: CancelSignal | None = None,
        on_progress: Callable[[ToolResult], None] | None = None,
        extras: dict[str, Any] | None = None,
    ) -> ToolContext:
        """A call's context: the workspace, the policy's env passthrough and network flag,
        the skill policy and the subagent flag of this projection (``extras``: what a tool of
        a higher room needs, e.g. the delegate tools' turn and call id)."""
        return tool_context_build(
            policy=self.tool_policy,
            roots=roots,
            cwd=cwd,
            cancel=cancel,
            on_progress=on_progress,
            skill_policy=self.skill_policy,
            for_subagent=self.projection.for_subagent,
            extras=extras,
        )

    def execute(self, name: str, args: Any, ctx: ToolContext) -> ToolResult:
        """Run ``name`` if the projection makes it effective; an error result otherwise. Never raises."""
        return tool_execute(name=name, args=args, ctx=ctx, projection=self.projection)


def model_without_tools(model) -> str:
    """Why ``model`` gets no tools ("" when it takes them): its ``supports_tools`` is off."""
    if model is None or model.supports_tools:
        return ""
    return f"the model {model.name!r} does not support tool calls (its supports_tools is off)"


def agent_tool_projection(agent, *, for_subagent: bool = False, model=None, governance=None) -> ToolProjection:
    """The effective projection of ``agent``'s tool policy: what a run (or, with
    ``for_subagent``, a subagent) of it may call, and why. Pages, the API and the turn
    loop all read it here; ``PolicyError`` on an invalid stored policy. ``model``: the
    model the run calls (default: the agent's); one without tool support gets no tool.
    ``governance``: the ToolConfig rules read once for many agents (a list page)."""
    # The delegate tools: on when the subagent policy lets the agent delegate. As a subagent
    # (a child process) it never asks the user, and whether it may delegate is not its own
    # policy's call: the delegating parent's policy and depth decide per call (a child below
    # max_depth gets them as proxy tools, runtime/subagents/host.py).
    tool_policy, runtime_policy = effective_tool_policy(agent.tool_policy, agent.subagent_policy)
    if for_subagent:
        why = "a subagent cannot delegate further unless the delegating parent's subagent_policy allows it at that depth (max_depth)"
        runtime_policy = {"denied": {**dict.fromkeys(DELEGATE_TOOLS, why), "ask_user": "never offered to subagents"}}
    no_tools = model_without_tools(model if model is not None else agent.model)
    if no_tools:
        runtime_policy = {**runtime_policy, "no_tools_reason": no_tools}
    return resolve_tools(tool_policy, for_subagent=for_subagent, runtime_policy=runtime_policy, governance=governance, agent=agent.name)


def agent_tools(agent, *, for_subagent: bool = False, model=None) -> AgentTools:
    """``agent``'s tools: the effective projection of its tool policy (with the projection's
    warnings about names it ignored), and both policies parsed for the calls' contexts.

    A stored policy naming a tool that no longer exists is not an error (the projection
    reports it in ``warnings``); any other invalid policy raises ``PolicyError`` /
    ``SkillPolicyError`` (``Agent.clean`` refuses them, so only a row written behind it has one).
    """
    tool_policy, _ignored = parse_policy(agent.tool_policy or {}, unknown_tools="ignore")
    return AgentTools(
        projection=agent_tool_projection(agent, for_subagent=for_subagent, model=model),
        tool_policy=tool_policy,
        skill_policy=SkillPolicy.from_dict(agent.skill_policy or {}),
    )
