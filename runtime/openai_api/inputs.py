"""What an OpenAI request asks for, checked: the conversation it carries, the instructions, the
parameters (docs/api.md, "Parameters"). Nothing here reads or writes the database.

Every refusal is a 400 naming the parameter (``OpenAIError``): client-side tools, structured
output, several choices, audio, files and images by URL, item types Neta has no counterpart
for. Sampling parameters are checked for their type and range and kept for the run
(``AgentRun.sampling``: each provider takes what it can, runtime/llm/sampling.py); the rest of
OpenAI's parameters are ignored, as OpenAI-compatible servers commonly do.
"""

from __future__ import annotations

import binascii
import math
import re
from dataclasses import dataclass, field

from runtime.openai_api.errors import invalid, unsupported
from runtime.runs.prompts import IMAGE_TYPES, MAX_PROMPT_CHARS

MAX_MESSAGES = 1000  # a conversation sent in one request
MAX_STOP = 4
# OpenAI's reasoning efforts → Pi's thinking levels (for an agent whose model thinks).
EFFORTS = {"none": "off", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}
_DATA_URL = re.compile(r"^data:(image/[a-z+.-]+);base64,(.*)$", re.S)


@dataclass
class Message:
    """A message of the client's conversation: who said it, its text and its images."""

    role: str  # user | assistant
    text: str
    images: list[dict] = field(default_factory=list)  # {data, mimeType}


@dataclass
class Call:
    """One request: the agent, the conversation, and how to answer it."""

    model: str
    messages: list[Message]
    instructions: str = ""
    sampling: dict = field(default_factory=dict)
    effort: str | None = None  # a thinking level, when the client asked for a reasoning effort
    stream: bool = False
    include_usage: bool = False
    previous_response_id: str | None = None

    @property
    def prompt(self) -> Message:
        return self.messages[-1]

    @property
    def history(self) -> list[Message]:
        return self.messages[:-1]


def _object(body) -> dict:
    if not isinstance(body, dict):
        raise invalid(None, "the request body must be a JSON object")
    return body


def _model(body: dict) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid("model", "required: the name of a Neta agent (GET /v1/models lists them)", "missing_required_parameter")
    if len(model) > 100:
        raise invalid("model", "at most 100 characters")
    return model.strip()


def _bool(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(name, "must be true or false")
    return value


def _number(body: dict, name: str, low: float, high: float, out: dict, key: str | None = None) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise invalid(name, f"must be a number from {low:g} to {high:g}")
    out[key or name] = value


def _whole(body: dict, name: str, low: int, high: int, out: dict, key: str | None = None) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(name, f"must be a whole number from {low} to {high}")
    out[key or name] = value


def _stop(body: dict, out: dict) -> None:
    value = body.get("stop")
    if value is None:
        return
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not 1 <= len(stops) <= MAX_STOP or not all(isinstance(s, str) and s and len(s) <= 200 for s in stops):
        raise invalid("stop", f"must be a string or a list of 1 to {MAX_STOP} strings of at most 200 characters")
    out["stop"] = stops


def _effort(value, param: str) -> str | None:
    if value is None:
        return None
    if value not in EFFORTS:
        raise invalid(param, f"must be one of {', '.join(EFFORTS)}")
    return EFFORTS[value]


def _no_client_tools(body: dict, tools: str = "tools", choice: str = "tool_choice") -> None:
    if body.get(tools) not in (None, []):
        raise unsupported(tools, "client-side tools are not supported: the agent runs its own tools on the server (they are in the session)")
    value = body.get(choice)
    if value not in (None, "auto", "none"):
        raise unsupported(choice, "only 'auto' or 'none' (no client-side tools are given)")


def _text_only_format(value, param: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or value.get("type") != "text":
        raise unsupported(param, "structured output is not supported: only {'type': 'text'}")


def _image(url, param: str) -> dict:
    if isinstance(url, dict):  # chat: {"url": …, "detail": …}
        url = url.get("url")
    if not isinstance(url, str):
        raise invalid(param, "must be a data URL (data:image/png;base64,…)")
    match = _DATA_URL.match(url)
    if match is None:
        raise unsupported(param, "images are taken as data URLs (data:image/png;base64,…), not fetched from a URL or a file id")
    mime, data = match.group(1), match.group(2)
    if mime not in IMAGE_TYPES:
        raise invalid(param, f"the image type must be one of {', '.join(IMAGE_TYPES)}")
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise invalid(param, "the data URL does not hold base64") from None
    return {"data": data, "mimeType": mime}


def _text(value, param: str) -> str:
    if not isinstance(value, str):
        raise invalid(param, "must be a string")
    if len(value) > MAX_PROMPT_CHARS:
        raise invalid(param, f"at most {MAX_PROMPT_CHARS} characters")
    return value


def _content(content, param: str, *, role: str, chat: bool) -> tuple[str, list[dict]]:
    """A message's text (its text parts joined by newlines, as a stored prompt's) and images."""
    if isinstance(content, str):
        return _text(content, param), []
    if content is None and role == "assistant":
        return "", []
    if not isinstance(content, list):
        raise invalid(param, "must be a string or a list of content parts")
    texts, images = [], []
    for i, part in enumerate(content):
        where = f"{param}[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text"):
            texts.append(_text(part.get("text"), f"{where}.text"))
        elif kind == "refusal" and role == "assistant":
            texts.append(_text(part.get("refusal"), f"{where}.refusal"))
        elif kind in ("image_url", "input_image") and role == "user":
            images.append(_image(part.get("image_url"), f"{where}.image_url"))
        elif kind in ("input_audio", "input_file", "file", "audio"):
            raise unsupported(where, f"{kind} parts are not supported (text and images only)")
        else:
            raise invalid(where, f"a content part of type {kind!r} is not supported here" if kind else "must be an object with a 'type'")
    text = "\n".join(texts)
    if len(text) > MAX_PROMPT_CHARS:
        raise invalid(param, f"at most {MAX_PROMPT_CHARS} characters")
    return text, images


def _conversation(messages: list[Message], param: str) -> list[Message]:
    if not messages:
        raise invalid(param, "holds no user message", "missing_required_parameter")
    if len(messages) > MAX_MESSAGES:
        raise invalid(param, f"at most {MAX_MESSAGES} messages")
    if messages[-1].role != "user":
        raise invalid(param, "the last message must be a user message (the agent answers it)")
    for message in messages:
        if message.role == "user" and not message.text.strip():
            raise invalid(param, "a user message needs text (images go with text)")
    return messages


def _join(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


# --------------------------------------------------------------------------- POST /v1/responses


def responses_call(body) -> Call:
    body = _object(body)
    model = _model(body)
    _no_client_tools(body)
    for name in ("background", "conversation", "prompt"):
        if body.get(name) not in (None, False):
            raise unsupported(name, {
                "background": "background responses are not supported: every run is followed by its request (it runs on in the session)",
                "conversation": "conversations are not supported: continue with previous_response_id",
                "prompt": "reusable prompts are not supported: send instructions",
            }[name])  # fmt: skip
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise invalid("text", "must be an object")
        _text_only_format(text.get("format"), "text.format")
    sampling: dict = {}
    _number(body, "temperature", 0, 2, sampling)
    _number(body, "top_p", 0, 1, sampling)
    _whole(body, "max_output_tokens", 1, 10_000_000, sampling, "max_tokens")
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, dict):
        raise invalid("reasoning", "must be an object")
    effort = _effort((reasoning or {}).get("effort"), "reasoning.effort")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("instructions", "must be a string")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise invalid("previous_response_id", "must be a string")
    system, messages = [], []
    raw = body.get("input")
    if isinstance(raw, str):
        messages.append(Message("user", _text(raw, "input")))
    elif isinstance(raw, list):
        for i, item in enumerate(raw):
            where = f"input[{i}]"
            if not isinstance(item, dict):
                raise invalid(where, "must be an object")
            kind = item.get("type", "message")
            if kind != "message":
                raise unsupported(f"{where}.type", f"items of type {str(kind)[:40]!r} are not supported (messages only: the agent's own tool calls stay on the server)")
            role = item.get("role")
            if role in ("system", "developer"):
                system.append(_content(item.get("content"), f"{where}.content", role=role, chat=False)[0])
            elif role in ("user", "assistant"):
                text_, images = _content(item.get("content"), f"{where}.content", role=role, chat=False)
                messages.append(Message(role, text_, images))
            else:
                raise invalid(f"{where}.role", "must be user, assistant, system or developer")
    else:
        raise invalid("input", "required: a string or a list of messages", "missing_required_parameter")
    return Call(
        model=model,
        messages=_conversation(messages, "input"),
        instructions=_join([instructions or "", *system]),
        sampling=sampling,
        effort=effort,
        stream=_bool(body, "stream"),
        previous_response_id=previous or None,
    )


# --------------------------------------------------------------------------- POST /v1/chat/completions


def chat_call(body) -> Call:
    body = _object(body)
    model = _model(body)
    _no_client_tools(body)
    _no_client_tools(body, "functions", "function_call")
    if body.get("response_format") is not None:
        _text_only_format(body.get("response_format"), "response_format")
    n = body.get("n")
    if n not in (None, 1):
        raise unsupported("n", "one choice per request (a turn has one answer; regenerate by sending the history again)")
    modalities = body.get("modalities")
    if modalities not in (None, ["text"]):
        raise unsupported("modalities", "only ['text']")
    for name in ("audio", "web_search_options"):
        if body.get(name) is not None:
            raise unsupported(name, "not supported")
    sampling: dict = {}
    _number(body, "temperature", 0, 2, sampling)
    _number(body, "top_p", 0, 1, sampling)
    _number(body, "presence_penalty", -2, 2, sampling)
    _number(body, "frequency_penalty", -2, 2, sampling)
    _whole(body, "seed", -(2**63), 2**63 - 1, sampling)
    _whole(body, "max_tokens", 1, 10_000_000, sampling)
    _whole(body, "max_completion_tokens", 1, 10_000_000, sampling, "max_tokens")
    _stop(body, sampling)
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("stream_options", "must be an object")
    include_usage = bool((options or {}).get("include_usage"))
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise invalid("messages", "required: a list of messages", "missing_required_parameter")
    if len(raw) > MAX_MESSAGES:
        raise invalid("messages", f"at most {MAX_MESSAGES} messages")
    system, messages = [], []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise invalid(where, "must be an object")
        role = item.get("role")
        if role in ("system", "developer"):
            system.append(_content(item.get("content"), f"{where}.content", role=role, chat=True)[0])
        elif role in ("user", "assistant"):
            if role == "assistant" and (item.get("tool_calls") not in (None, []) or item.get("function_call") is not None):
                raise unsupported(f"{where}.tool_calls", "client-side tool calls are not supported")
            text_, images = _content(item.get("content"), f"{where}.content", role=role, chat=True)
            messages.append(Message(role, text_, images))
        elif role in ("tool", "function"):
            raise unsupported(f"{where}.role", "client-side tool results are not supported: the agent runs its own tools on the server")
        else:
            raise invalid(f"{where}.role", "must be system, developer, user or assistant")
    return Call(
        model=model,
        messages=_conversation(messages, "messages"),
        instructions=_join(system),
        sampling=sampling,
        effort=_effort(body.get("reasoning_effort"), "reasoning_effort"),
        stream=stream,
        include_usage=include_usage,
    )
