"""A session's approval mode and rules, as its active path records them (runs/approvals.py).

The agent's tool policy sets the mode; a session may tighten it with a ``neta.permission_mode``
entry (a Pi ``custom`` entry the model never reads), never loosen it: the mode in force is the
stricter of the two. "Allow for this session" decisions are ``neta.approval`` entries.
"""

from __future__ import annotations

import datetime as dt

from runtime.errors import RuntimeInputError
from runtime.models import Agent
from runtime.runs import approvals
from runtime.runs.selectors import active_run
from sessions_tree.acting import acting_as
from sessions_tree.errors import SessionBusy
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session
from toolcatalog.policy import APPROVAL_MODES, ToolPolicy


def agent_approval_mode(agent) -> str:
    """The agent's approval mode (``auto`` for a stored policy that cannot be read: its
    runs fail on that policy anyway; for a session whose agent is gone: nothing runs)."""
    if agent is None:
        return "auto"
    try:
        return ToolPolicy.from_dict(agent.tool_policy or {}, unknown_tools="ignore").approval
    except ValueError:
        return "auto"


def session_approvals(meta: AgentSession) -> dict:
    """What the chat page and the API show: the agent's mode, the session's own, the mode in
    force, and the session's rules."""
    state = approvals.read_path(provider_for_session(meta.session_id).get_active_path(meta.session_id, meta=meta))
    agent_mode = agent_approval_mode(Agent.objects.filter(name=meta.agent).first())
    return {
        "agentMode": agent_mode,
        "sessionMode": state.mode,
        "mode": approvals.effective_mode(agent_mode, state),
        "modes": list(APPROVAL_MODES),
        "rules": [{"tool": r.tool, **({"prefix": r.prefix} if r.prefix else {})} for r in state.rules],
    }


def session_set_permission_mode(*, meta: AgentSession, mode, actor) -> dict:
    """Record ``mode`` as the session's own (the agent's still bounds it from below). 400
    ``mode`` for an unknown mode, 409 while a run is active (the leaf is its answer)."""
    if mode not in APPROVAL_MODES:
        raise RuntimeInputError("mode", f"must be one of {', '.join(APPROVAL_MODES)}")
    if active_run(meta.session_id) is not None:
        raise SessionBusy("a run is active: change the approval mode when it ends")
    data = {"mode": mode}
    if getattr(actor, "pk", None):
        data["by"] = actor.get_username()
    with acting_as(actor):
        return provider_for_session(meta.session_id).append_custom_entry(meta.session_id, custom_type=approvals.MODE_TYPE, data=data)


#: The most decisions the console's session page lists (the newest).
DECISIONS_SHOWN = 200


def session_decisions(meta: AgentSession, *, limit: int = DECISIONS_SHOWN) -> tuple[list[dict], int]:
    """Every approval decision and approval-mode change the session's tree holds, on every
    branch, newest first (at most ``limit``), and how many there are. Each row says whether it
    is on the active path: those are the ones that count for the session's rules."""
    provider = provider_for_session(meta.session_id)
    on_path = {e["id"] for e in provider.get_active_path(meta.session_id, meta=meta)}
    kinds = {approvals.DECISION_TYPE: "decision", approvals.MODE_TYPE: "mode"}
    rows = [
        {**(entry.get("data") or {}), "kind": kinds[entry["customType"]], "entryId": entry["id"], "timestamp": entry.get("timestamp"), "onPath": entry["id"] in on_path}
        for entry in provider.list_entries(meta.session_id)
        if entry.get("type") == "custom" and entry.get("customType") in kinds and isinstance(entry.get("data") or {}, dict)
    ]  # fmt: skip
    rows.reverse()
    for row in rows[:limit]:
        row["when"] = _when(row)
    return rows[:limit], len(rows)


def _when(row: dict) -> dt.datetime | None:
    at = row.get("at")
    if isinstance(at, int | float) and not isinstance(at, bool):
        return dt.datetime.fromtimestamp(at / 1000, tz=dt.timezone.utc)
    try:
        return dt.datetime.fromisoformat(str(row.get("timestamp")).replace("Z", "+00:00"))
    except ValueError:
        return None
