"""The request that produced an entry, as its trace recorded it: what the session's "context
at an entry" page shows above the context rebuilt from the tree (docs/runtime.md, "Traces")."""

from __future__ import annotations

import json

from runtime.api.views.traces import rebuilt_body, rebuilt_request
from runtime.models import ModelCall, ModelConfig
from sessions_tree.context import estimate_tokens
from sessions_tree.errors import SessionTreeError

BODY_CHARS_SHOWN = 200_000  # of the rebuilt body's JSON (the trace API has it whole)


def _pretty(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def recorded_request(session_id: str, entry_id: str) -> dict | None:
    """The recorded request whose answer is ``entry_id`` (the last attempt, the one that
    answered), rebuilt by ``runtime.llm.bodies`` — or None when no call of the session's
    runs produced that entry (not a model's answer, written before traces, or pruned)."""
    if not entry_id:
        return None
    call = ModelCall.objects.filter(session_id=session_id, entry_id=entry_id, subprocess_run__isnull=True).order_by("-started_at", "-pk").first()
    if call is None:
        return None
    out = {
        "call": call, "settings": _pretty(call.settings), "thinking": (call.settings or {}).get("thinking_level") or "off",
        "ttft_ms": round((call.first_token_at - call.started_at).total_seconds() * 1000) if call.first_token_at else None,
        "rebuild_error": "", "model_known": ModelConfig.objects.filter(name=call.model).exists(),
    }  # fmt: skip
    try:
        request = rebuilt_request(call)
        body = rebuilt_body(call)
    except (SessionTreeError, OSError, ValueError) as exc:  # the tree moved on (its entries gone) or a blob is damaged
        out["rebuild_error"] = str(exc)
        return out
    out.update(
        system=request.system_prompt,
        tools=[t.get("name", "?") for t in request.tools if isinstance(t, dict)],
        tools_json=_pretty(request.tools),
        messages=[{"position": i + 1, "role": m.get("role", "?") if isinstance(m, dict) else "?", "tokens": estimate_tokens(m)} for i, m in enumerate(request.messages)],
        messages_json=_pretty(request.messages),
        body=_pretty(body)[:BODY_CHARS_SHOWN] if body is not None else "",
    )
    return out
