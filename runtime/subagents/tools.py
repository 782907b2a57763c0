"""The delegate tools: ``delegate_task``, ``delegate_parallel``, ``delegate_chain`` (docs/subagents.md).

Registered into ``toolcatalog.protocol`` by :func:`register_delegate_tools` (the runtime
app's ``ready()``). They are offered only to agents whose ``subagent_policy`` lets them
delegate (``runtime.agents.subagent_policy.effective_tool_policy`` decides, for the turn loop,
the API and the console alike); the host re-checks everything when one is called.
Each runs in the parent's process and never in a child (route ``disabled``).
"""

from __future__ import annotations

from typing import Any

from runtime.subagents.host import Task, delegate
from toolcatalog.protocol import (
    Tool,
    ToolContext,
    ToolManifest,
    ToolResult,
    register_tool,
)

_MANIFEST = ToolManifest(kind="extension", execution_mode="subprocess", supported_in_worker=False, default_route="disabled")

_TASK = {
    "type": "object",
    "properties": {
        "agent": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The child agent's name (one the policy allows)."},
        "task": {"type": "string", "minLength": 1, "maxLength": 100_000, "description": "What the child should do, self-contained."},
        "context": {"type": "string", "maxLength": 100_000, "description": "Optional background from this conversation the child needs."},
    },
    "required": ["agent", "task"],
    "additionalProperties": False,
}


def _tasks(items: list[dict[str, Any]]) -> list[Task]:
    return [Task(agent=i["agent"], task=i["task"], context=i.get("context") or "") for i in items]


class DelegateTaskTool(Tool):
    name = "delegate_task"
    label = "Delegate a task"
    description = (
        "Hand one self-contained task to a subagent: another agent that runs in its own process with "
        "its own context and restricted tools. Returns the subagent's full final answer."
    )
    parameters = _TASK
    manifest = _MANIFEST

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        return delegate(ctx, mode="single", tasks=_tasks([args]))


class DelegateParallelTool(Tool):
    name = "delegate_parallel"
    label = "Delegate tasks in parallel"
    description = (
        "Run several independent tasks at once, each in its own subagent process. Returns every "
        "subagent's full final answer, in the order of the tasks."
    )
    parameters = {
        "type": "object",
        "properties": {"tasks": {"type": "array", "minItems": 1, "maxItems": 32, "items": _TASK}},
        "required": ["tasks"],
        "additionalProperties": False,
    }
    manifest = _MANIFEST

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        return delegate(ctx, mode="parallel", tasks=_tasks(args["tasks"]))


class DelegateChainTool(Tool):
    name = "delegate_chain"
    label = "Delegate a chain of tasks"
    description = (
        "Run tasks one after the other, each in its own subagent process; '{previous}' in a task is "
        "replaced by the previous step's final answer. Stops at the first step that fails."
    )
    parameters = {
        "type": "object",
        "properties": {"steps": {"type": "array", "minItems": 1, "maxItems": 32, "items": _TASK}},
        "required": ["steps"],
        "additionalProperties": False,
    }
    manifest = _MANIFEST

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        return delegate(ctx, mode="chain", tasks=_tasks(args["steps"]))


def register_delegate_tools() -> None:
    for tool in (DelegateTaskTool(), DelegateParallelTool(), DelegateChainTool()):
        register_tool(tool, replace=True)
