"""Tool approvals: which calls wait for a person, and the decisions the tree remembers
(docs/tools.md, "Approvals").

An agent's tool policy names its approval mode (``toolcatalog.policy.APPROVAL_MODES``); a
session may tighten it, never loosen it, with a ``neta.permission_mode`` entry. A call that
needs approval parks the run in ``waiting`` exactly like a question (``turn._park``): the
run's ``question`` is the approval request, of ``kind`` ``approval``.
``questions.decide_approval`` (REST ``POST /api/sessions/{id}/approve/``, the socket's
``approve`` command) settles it and resumes the run; expiry (the reaper's round,
``questions.expire_questions``) settles it as a denial. This module holds the rules; it
sits below the turn loop that applies them.

Every decision is a Pi ``custom`` entry (``neta.approval``) on the active path, which the
model's context never includes. "Allow for this session" rules are read back from those
entries, so they hold after a reload or a restart and in a fork (which copies the path),
and a new session starts without them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from sessions_tree.ids import now_ms
from toolcatalog.policy import APPROVAL_MODES
from toolcatalog.protocol import Tool

DECISION_TYPE = "neta.approval"
MODE_TYPE = "neta.permission_mode"
# Calls that never wait, whatever the mode: asking the person something, and the plan.
NEVER_ASK = frozenset({"ask_user", "todo"})
DECISIONS = ("allow", "deny")
SCOPES = ("once", "session")
MAX_NOTE = 2000
MAX_PREFIX = 500
MAX_SHOWN_ARGUMENT = 20_000  # characters of an argument the request shows
MAX_DIFF_LINES = 400


def stricter(a: str, b: str) -> str:
    """The stricter of two approval modes."""
    return max(a, b, key=APPROVAL_MODES.index)


@dataclass(frozen=True)
class Rule:
    """An "allow for this session" decision: this tool, or (bash) commands starting with ``prefix``."""

    tool: str
    prefix: str = ""

    def allows(self, name: str, args: dict[str, Any]) -> bool:
        if name != self.tool:
            return False
        if not self.prefix:
            return True
        command = args.get("command") if isinstance(args, dict) else None
        return isinstance(command, str) and command.lstrip().startswith(self.prefix)


@dataclass(frozen=True)
class SessionApprovals:
    """What the active path says: the session's mode (if it set one) and its rules."""

    mode: str | None
    rules: tuple[Rule, ...]


def read_path(path: list[dict]) -> SessionApprovals:
    """The session's approval state, from its active path's entries (oldest first)."""
    mode, rules = None, []
    for entry in path:
        if entry.get("type") != "custom":
            continue
        data = entry.get("data") if isinstance(entry.get("data"), dict) else {}
        if entry.get("customType") == MODE_TYPE and data.get("mode") in APPROVAL_MODES:
            mode = data["mode"]
        elif entry.get("customType") == DECISION_TYPE and data.get("decision") == "allow" and data.get("scope") == "session":
            if isinstance(data.get("tool"), str):
                rules.append(Rule(tool=data["tool"], prefix=str(data.get("prefix") or "")))
    return SessionApprovals(mode=mode, rules=tuple(rules))


def effective_mode(agent_mode: str, session: SessionApprovals) -> str:
    return stricter(agent_mode, session.mode) if session.mode else agent_mode


def refused_in_plan_mode(tool: Tool | None, args: dict[str, Any]) -> bool:
    return tool is None or tool.changes_with(args if isinstance(args, dict) else {})


def needs_approval(mode: str, tool: Tool | None, name: str, args: Any, rules: tuple[Rule, ...]) -> bool:
    """Whether this call waits for a person in ``mode`` (``plan_only`` refuses instead: see
    ``refused_in_plan_mode``). A tool the projection does not know is left to it (its error)."""
    if mode == "auto" or name in NEVER_ASK or tool is None:
        return False
    args = args if isinstance(args, dict) else {}
    if mode == "ask_changes" and not tool.changes_with(args):
        return False
    return not any(rule.allows(name, args) for rule in rules)


def _shown(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_SHOWN_ARGUMENT:
        return value[:MAX_SHOWN_ARGUMENT] + f"… ({len(value) - MAX_SHOWN_ARGUMENT} more characters)"
    return value


def request_for(call: dict, *, mode: str, cwd: str, preview: dict | None = None) -> dict:
    """The approval request a call becomes: the exact call, and what a person needs to judge
    it (bash: the command and its directory; edit: the change as a diff — against the file as
    it is, from the tool's ``preview``, else of the replaced text; write: the path, and the
    diff against the file as it is, or from nothing for a new one)."""
    name, args = call.get("name") or "", call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    request: dict[str, Any] = {
        "kind": "approval",
        "toolCallId": call.get("id") or "",
        "tool": name,
        "arguments": {key: _shown(value) for key, value in args.items()},
        "mode": mode,
    }
    if name == "bash":
        request.update(command=str(args.get("command") or ""), cwd=cwd)
    elif name == "edit":
        request["path"] = str(args.get("path") or "")
        if preview and isinstance(preview.get("diff"), str):
            request["diff"], request["diffOf"] = _bounded_diff(preview["diff"].splitlines()), "file"
        else:
            request["diff"], request["diffOf"] = edit_diff(args), "replacements"
    if preview and preview.get("previewError"):
        request["previewError"] = str(preview["previewError"])
    elif name == "write":
        request["path"] = str(args.get("path") or "")
        if preview and isinstance(preview.get("diff"), str):
            request["diff"], request["diffOf"] = _bounded_diff(preview["diff"].splitlines()), "file"
            request["created"] = bool(preview.get("created"))
    return request


def edit_diff(args: dict[str, Any]) -> str:
    """The edit's replacements as a unified diff of the replaced text (the file is not read:
    the request shows what the model asked for)."""
    edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
    lines: list[str] = []
    for item in edits:
        if not isinstance(item, dict):
            continue
        old, new = item.get("oldText", item.get("old_string", "")), item.get("newText", item.get("new_string", ""))
        if not isinstance(old, str) or not isinstance(new, str):
            continue
        lines += difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=2)
    return _bounded_diff(lines)


def _bounded_diff(lines: list[str]) -> str:
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    return "\n".join(lines)


def decision_data(question: dict) -> dict:
    """The ``neta.approval`` entry's data for a settled request."""
    outcome = question.get("outcome")
    data = {
        "toolCallId": question.get("toolCallId"),
        "tool": question.get("tool"),
        "decision": "allow" if outcome == "allowed" else "deny",
        "scope": question.get("scope") or "once",
        "by": question.get("decidedBy"),
        "at": question.get("decidedAt") or question.get("expiredAt") or now_ms(),
    }
    if question.get("prefix"):
        data["prefix"] = question["prefix"]
    if question.get("note"):
        data["note"] = question["note"]
    if outcome == "expired":
        data["expired"] = True
    if question.get("command"):
        data["command"] = question["command"]
    return data


def denial_text(question: dict) -> str:
    """The tool result of a call that was not allowed."""
    if question.get("outcome") == "expired":
        minutes = max(1, round(int(question.get("timeoutSeconds") or 0) / 60))
        return f"Not run: nobody approved this call within {minutes} minute(s). Go on without it, or ask the user."
    who = question.get("decidedBy") or "the user"
    note = question.get("note")
    return f"Not run: {who} denied this call." + (f" Their note: {note}" if note else "") + " Go on without it, or ask the user."
