"""Building envelopes and inspecting processes for the subagent tests."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

from runtime.subagents.envelope import parse_envelope


def scripted_rules(*replies, rules=()) -> dict:
    """Scripted rules whose default answers the n-th model call with the n-th reply."""
    return {"version": 1, "chunk_size": 4, "delay_ms": 0, "rules": list(rules), "default": {"replies": list(replies)}}


LS_THEN_ANSWER = scripted_rules(
    [{"text": "Let me look."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}],
    [{"text": "The workspace holds notes.txt."}],
)


def envelope_dict(workspace: Path, *, rules: dict | None = None, limits: dict | None = None, tools=None, **overrides) -> dict:
    data = {
        "v": 1,
        "runId": uuid.uuid4().hex,
        "sessionId": "session-1",
        "parentEntryId": "entry-1",
        "parentRunId": "parent-run-1",
        "batchId": "batch-1",
        "toolCallId": "call-1",
        "taskIndex": 0,
        "depth": 1,
        "agent": "default",
        "task": "List the workspace and say what is there.",
        "restrictedSystemPrompt": "You are a subagent. Do the task and answer briefly.",
        "toolPolicy": {
            "tools": tools
            if tools is not None
            else [{"name": "ls", "route": "worker-local"}, {"name": "bash", "route": "worker-local"}],
        },
        "allowedSkills": [],
        "contextSummary": "",
        "runtimeConfig": {
            "model": {
                "providerKind": "scripted",
                "modelId": "demo",
                "providerName": "scripted",
                "options": {"rules": rules or LS_THEN_ANSWER},
            },
            "thinkingLevel": "off",
            "cwd": str(workspace),
            "workspaceRoots": [str(workspace)],
            "sandbox": {"mode": "none", "protectedPaths": [], "toolSettings": {}},
        },
        "limits": {"maxTurns": 10, "maxToolCalls": 10, "wallClockSeconds": 60, "idleSeconds": 30, "heartbeatSeconds": 0.5, **(limits or {})},
    }
    data.update(overrides)
    return data


def make_envelope(workspace: Path, **kw):
    return parse_envelope(envelope_dict(workspace, **kw))


def group_members(pgid: int, *, alive: bool = False) -> list[int]:
    """Every process whose process group is ``pgid``; zombies count unless ``alive`` (a zombie
    is dead but not reaped: our supervisor reaps its children, init reaps orphans)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and not (alive and fields[0] == "Z"):
            found.append(int(entry))
    return found


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry))
    return found


class Recorder:
    """Collects events; ``wait_for(type)`` blocks until one of that type arrived."""

    def __init__(self):
        self.events: list[dict] = []
        self.noise: list[dict] = []
        self._cond = threading.Condition()
        self.hooks: dict[str, callable] = {}

    def __call__(self, event: dict) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()
        hook = self.hooks.pop(event["type"], None)
        if hook is not None:
            hook(event)

    def on_noise(self, item: dict) -> None:
        self.noise.append(item)

    def wait_for(self, type_: str, timeout: float = 30) -> dict:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(e["type"] == type_ for e in self.events), timeout)
            assert ok, f"no {type_} event within {timeout} s; got {[e['type'] for e in self.events]}"
            return next(e for e in self.events if e["type"] == type_)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]
