"""The body a model call sends over the wire, rebuilt from its model and request: what the
run's trace shows as the call's exact request (the same ``build_params`` the call used)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, fields

from .spec import LlmRequest, ModelSpec

REFERENCED = ("system_prompt", "messages", "tools")  # the request's fields a trace stores by reference


def digest(text: str) -> str:
    """The SHA-256 a trace stores a shared text under (a system prompt, a set of tool definitions)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tools_text(tools: list[dict]) -> str:
    """Tool definitions as the one text their digest is taken of."""
    return json.dumps(tools, ensure_ascii=False, separators=(",", ":"))


def request_settings(request: LlmRequest) -> dict:
    """The request's fields a trace stores as they are (all but those it stores by reference),
    copied as ``asdict`` copies them. Not ``asdict`` itself: it copied the whole transcript
    (``messages``) to leave it out, a deep copy of the session per model call."""
    return {f.name: copy.deepcopy(getattr(request, f.name)) for f in fields(request) if f.name not in REFERENCED}


def request_body(model: ModelSpec, request: LlmRequest) -> dict:
    """The JSON body of ``request`` to ``model``: for the wire APIs what their SDK sends (the
    keyword arguments it was given, with the stream flag and any extra body merged); for the
    offline scripted model, the request itself."""
    api = model.api
    if api == "anthropic-messages":
        from . import anthropic_messages  # each wire module loads with the first call of its kind

        return {**anthropic_messages.build_params(model, request), "stream": True}
    if api == "openai-completions":
        from . import openai_completions  # each wire module loads with the first call of its kind

        params, extra = openai_completions.build_params(model, request)
        return {**params, **(extra or {})}
    if api == "openai-responses":
        from . import openai_responses  # each wire module loads with the first call of its kind

        return openai_responses.build_params(model, request)
    return {"model": model.model_id, **asdict(request)}
