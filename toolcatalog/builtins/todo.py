"""``todo``: the model's plan for the task, as a list it replaces whole on each call.

Like Claude Code's TodoWrite: each call sends every item (``content`` and ``status``
``pending`` / ``in_progress`` / ``completed``); the result repeats the list in
``details.todos`` so the plan at any point of the tree is the last ``todo`` result on
the path (the chat page's plan panel reads it there, ``static/chat/plan.js``). Nothing
is stored besides the tool call and its result: a branch has its own plan.
"""

from __future__ import annotations

from typing import Any

from toolcatalog.manifest import ToolManifest
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.visible import is_blank

TODO_STATUSES = ("pending", "in_progress", "completed")
MAX_TODOS = 50
MAX_CONTENT = 500
_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoTool(Tool):
    name = "todo"
    changes = False
    label = "todo"
    description = (
        "Keep a short plan for the current task as a todo list. Each call replaces the whole list: send every "
        "item with its status (pending, in_progress or completed). Use it for work of three steps or more; keep "
        "at most one item in_progress and mark items completed as soon as they are done."
    )
    parameters = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The whole plan, in order",
                "maxItems": MAX_TODOS,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT, "description": "What to do, one line"},
                        "status": {"type": "string", "enum": list(TODO_STATUSES)},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["todos"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process")

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        todos = []
        for index, item in enumerate(args["todos"]):
            content = " ".join(item["content"].split())
            if is_blank(content):
                raise ToolError(f"todos[{index}].content must not be blank")
            todos.append({"content": content, "status": item["status"]})
        active = [i for i, t in enumerate(todos) if t["status"] == "in_progress"]
        if len(active) > 1:
            raise ToolError(f"at most one item may be in_progress, got {len(active)} (items {', '.join(str(i) for i in active)})")
        done = sum(1 for t in todos if t["status"] == "completed")
        lines = [f"Plan updated: {done} of {len(todos)} done."] if todos else ["Plan cleared."]
        lines += [f"{_MARK[t['status']]} {t['content']}" for t in todos]
        return ToolResult.text("\n".join(lines), details={"todos": todos, "completed": done, "total": len(todos)})
