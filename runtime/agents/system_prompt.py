"""How an agent's system prompt is assembled, in this order:

1. the agent's own prompt (or a short default when it has none);
1b. the user's custom instructions, when they set some (runtime/agents/instructions.py),
   under ``The user's custom instructions:``;
1c. the run's own instructions when it has some (an OpenAI client's ``instructions`` or
   system messages);
2. tool guidelines: one line per effective tool with a prompt hint, under
   ``Tool guidelines:`` (hints come from the effective tool projection);
3. the skill index (``<available_skills>`` block, Pi's shape, budgeted by the
   agent's skill policy), only when the agent can load skills (``read`` or
   ``read_skill`` is effective) and at least one skill is visible;
4. Pi's trailing lines: ``Current date: YYYY-MM-DD`` and
   ``Current working directory: <cwd>``, the session's own workspace directory
   (``runtime.agents.workspaces.workspace_for``: per session, per user or shared).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from skills_registry.policy import SkillPolicy
from skills_registry.selectors import skill_index_for
from toolcatalog.projection import ToolProjection

USER_INSTRUCTIONS_HEAD = "The user's custom instructions:"

DEFAULT_PROMPT = (
    "You are a helpful assistant working in the user's workspace. "
    "Use the tools you are given when they help, and say what you did."
)


@dataclass(frozen=True)
class PromptParts:
    agent_prompt: str
    tool_hints: dict[str, str]
    skill_index: str
    cwd: str
    date: dt.date
    user_instructions: str = ""
    instructions: str = ""

    def render(self) -> str:
        sections = [self.agent_prompt.strip() or DEFAULT_PROMPT]
        if self.user_instructions.strip():
            sections.append(f"{USER_INSTRUCTIONS_HEAD}\n{self.user_instructions.strip()}")
        if self.instructions.strip():
            sections.append(self.instructions.strip())
        if self.tool_hints:
            lines = ["Tool guidelines:"] + [f"- {name}: {hint.strip()}" for name, hint in self.tool_hints.items()]
            sections.append("\n".join(lines))
        text = "\n\n".join(sections)
        if self.skill_index:
            text += self.skill_index  # Pi's block starts with its own blank line
        text += f"\nCurrent date: {self.date.isoformat()}\nCurrent working directory: {self.cwd}"
        return text


def skill_index_text(agent, projection: ToolProjection) -> str:
    """The ``<available_skills>`` block for ``agent``; a subagent's projection
    (``projection.for_subagent``) lists only what subagents may load."""

    names = set(projection.effective_names())
    if "read_skill" in names:
        loader = "read_skill"
    elif "read" in names:
        loader = "read"
    else:
        return ""
    policy = SkillPolicy.from_dict(agent.skill_policy or {})
    return skill_index_for(policy=policy, for_subagent=projection.for_subagent, loader=loader).text


def build_system_prompt(
    agent, projection: ToolProjection, *, cwd: str, today: dt.date | None = None, user_instructions: str = "", instructions: str = ""
) -> str:
    return PromptParts(
        instructions=instructions or "",
        agent_prompt=agent.system_prompt,
        user_instructions=user_instructions,
        tool_hints=projection.prompt_hints(),
        skill_index=skill_index_text(agent, projection),
        cwd=cwd,
        date=today or dt.datetime.now(dt.timezone.utc).date(),
    ).render()
