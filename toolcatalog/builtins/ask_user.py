"""``ask_user``: the model asks the person a question and the run waits for the answer.

The tool itself only checks and normalizes the question; the waiting is the turn
loop's (``runtime/runs/turn.py``): it sees the pending question in the result's
``details``, stores no result, and parks the run in the ``waiting`` state until the
answer (``runtime.runs.questions.answer_question``) becomes the tool's result. Outside
a turn that can wait (no ``extras['can_wait']``) the call is an error. Never offered
to subagents (the manifest disables it in workers; the subagent host refuses it too).
"""

from __future__ import annotations

from typing import Any

from toolcatalog.manifest import ToolManifest
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.visible import is_blank

MAX_OPTIONS = 12
MAX_QUESTION = 2000
MAX_OPTION = 200


class AskUserTool(Tool):
    name = "ask_user"
    changes = False
    label = "ask user"
    description = (
        "Ask the user a question and wait for the answer, when you cannot go on without their decision. "
        "Give `options` for a choice (the user picks one, or several with multi_select), and allow_free_text "
        "to let them write their own answer. Ask one question at a time."
    )
    parameters = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
            "options": {
                "type": "array",
                "maxItems": MAX_OPTIONS,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_OPTION},
            },
            "allow_free_text": {"type": "boolean", "description": "The user may type an answer of their own (default: true without options, false with)"},
            "multi_select": {"type": "boolean", "description": "The user may pick several options (default false)"},
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", execution_mode="in-process", supported_in_worker=False, default_route="disabled")

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        question = args["question"].strip()
        if is_blank(question):
            raise ToolError("question must not be blank")
        options: list[str] = []
        for index, option in enumerate(args.get("options") or []):
            option = " ".join(option.split())
            if is_blank(option):
                raise ToolError(f"options[{index}] must not be blank")
            if option in options:
                raise ToolError(f"options[{index}] repeats {option!r}")
            options.append(option)
        free = args.get("allow_free_text")
        free = (not options) if free is None else bool(free)
        multi = bool(args.get("multi_select", False))
        if not options and not free:
            raise ToolError("a question without options must allow a free-text answer")
        if multi and not options:
            raise ToolError("multi_select needs options")
        if not ctx.extras.get("can_wait"):
            raise ToolError("ask_user is not available here: this run cannot wait for the user")
        ask = {"question": question, "options": options, "allowFreeText": free, "multiSelect": multi}
        return ToolResult.text(f"Waiting for the user's answer to: {question}", details={"pendingQuestion": ask})


def check_answer(ask: dict[str, Any], answer: Any) -> tuple[str, list[str]]:
    """The answer to ``ask`` as (text, chosen options), or ``ValueError`` saying what is wrong.

    ``answer`` is a string (an option, or free text where allowed) or, with
    ``multiSelect``, a list of options (free text allowed as one more element when
    ``allowFreeText``)."""
    options, free, multi = ask.get("options") or [], bool(ask.get("allowFreeText")), bool(ask.get("multiSelect"))
    values = answer if isinstance(answer, list) else [answer]
    if isinstance(answer, list) and not multi:
        raise ValueError("this question takes one answer, not a list")
    if not values:
        raise ValueError("choose at least one option")
    chosen, texts = [], []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"an answer must be text, got {type(value).__name__}")  # noqa: TRY004 - one kind of refusal for the caller
        value = value.strip()
        if is_blank(value):
            raise ValueError("the answer must not be blank")
        if len(value) > 10_000:
            raise ValueError("the answer is longer than 10000 characters")
        if value in options:
            if value not in chosen:
                chosen.append(value)
        elif free:
            texts.append(value)
        else:
            raise ValueError(f"{value!r} is not one of the options: {', '.join(options)}")
    if len(texts) > 1:
        raise ValueError("at most one free-text answer")
    return "; ".join([*chosen, *texts]), chosen
