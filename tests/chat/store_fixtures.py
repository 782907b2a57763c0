"""Shared store fixtures: a snapshot, the tree events of one action, the snapshot after.

Generated from real provider operations (``generate``) and checked by both sides:
``tests/chat/test_store_fixtures.py`` (Python's ``apply_event``) and
``tests/js/store_fixtures.test.mjs`` (the browser store's ``applyEvent``). The
committed set in ``tests/fixtures/store/`` is rewritten by running
``NETA_WRITE_STORE_FIXTURES=1 .venv/bin/python -m pytest tests/chat/test_store_fixtures.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from django.test import override_settings

from sessions_tree.events import apply_events

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "tests" / "fixtures" / "store"


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_767_000_000_000}


def assistant(text: str = "", *, thinking: str = "", calls=(), stop: str | None = None) -> dict:
    content: list[dict] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, arguments in calls:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
    return {
        "role": "assistant",
        "content": content,
        "api": "scripted",
        "provider": "scripted",
        "model": "scripted-demo",
        "usage": {
            "input": 120,
            "output": 30,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 150,
            "cost": {"input": 0.00012, "output": 0.00006, "cacheRead": 0, "cacheWrite": 0, "total": 0.00018},
        },
        "stopReason": stop or ("toolUse" if calls else "stop"),
        "timestamp": 1_767_000_000_500,
    }


def tool_result(call_id: str, name: str, text: str, *, error: bool = False) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": 1_767_000_001_000,
    }


class Recorder:
    """Runs actions on one session and records (before, events, after) for each."""

    def __init__(self, provider, session_id: str, prefix: str, *, windowed: bool = False):
        self.provider, self.session_id, self.prefix = provider, session_id, prefix
        self.windowed = windowed
        self.fixtures: list[dict] = []

    def step(self, name: str, action: Callable[[], object]):
        before = self.provider.get_snapshot(self.session_id)
        result = action()
        events = self.provider.events_since(self.session_id, before["revision"])
        fresh = self.provider.get_snapshot(self.session_id)
        fixture = {"name": f"{self.prefix}-{len(self.fixtures) + 1:02d}-{name}", "before": before, "events": events}
        if self.windowed:
            # A truncated snapshot keeps what it has when events arrive, so applying them
            # gives a superset of a fresh (re-trimmed) snapshot: `after` is what Python's
            # apply_event computes, and `fresh` what the server would send now.
            fixture["after"] = apply_events(before, events)
            fixture["fresh"] = fresh
        else:
            fixture["after"] = fresh
        self.fixtures.append(fixture)
        return result

    def sequence(self, name: str, actions: list[Callable[[], object]]) -> None:
        """Several actions as one fixture: the events apply one after the other."""
        self.step(name, lambda: [a() for a in actions])


def conversation(provider) -> list[dict]:
    p = provider
    sid = p.create_session(cwd="/workspace", agent="default", title="").session_id
    r = Recorder(p, sid, "conversation")
    r.step("model-change", lambda: p.append_model_change(sid, provider="scripted", model_id="scripted-demo"))
    r.step("thinking-level", lambda: p.append_thinking_level_change(sid, "medium"))
    u1 = r.step("user-message", lambda: p.append_message(sid, user("List the files, please.")))
    a1 = r.step(
        "assistant-tool-call",
        lambda: p.append_message(sid, assistant("Let me look.", thinking="The user wants a listing.", calls=[("call_1", "ls", {"path": "."})])),
    )
    r.step("tool-result", lambda: p.append_message(sid, tool_result("call_1", "ls", "README.md\nsrc/\n")))
    r.step("assistant-answer", lambda: p.append_message(sid, assistant("There are **two** entries.")))
    r.step("label-set", lambda: p.append_label_change(sid, target_id=u1["id"], label="start"))
    r.step("label-clear", lambda: p.append_label_change(sid, target_id=u1["id"], label=None))
    r.step("label-again", lambda: p.append_label_change(sid, target_id=a1["id"], label="  tools  "))
    r.step("rename", lambda: p.append_session_info(sid, name="  Listing files \u0085"))
    r.step("custom-entry", lambda: p.append_custom_entry(sid, custom_type="ui-state", data={"open": [1, 2]}))
    r.step("custom-message", lambda: p.append_custom_message(sid, custom_type="note", content="A note for the model", display=True))
    r.step("switch-leaf-back", lambda: p.switch_leaf(sid, a1["id"]))
    r.step("branch", lambda: p.append_message(sid, user("Actually, show hidden files too.")))
    r.step("branch-summary", lambda: p.append_branch_summary(sid, from_entry_id=u1["id"], summary="Tried listing; user changed their mind."))
    kept = p.get_snapshot(sid)["activePath"][0]
    r.step("compaction", lambda: p.append_compaction(sid, summary="Earlier: a listing.", first_kept_entry_id=kept, tokens_before=1234))
    r.step("reset-leaf", lambda: p.reset_leaf(sid))
    r.step("new-root", lambda: p.append_message(sid, user("A second root.")))
    entry = r.step("in-flight-begin", lambda: p.begin_in_flight(sid, assistant("")))
    r.step("in-flight-checkpoint", lambda: p.update_in_flight_entry(sid, entry["id"], assistant("Partial ans", thinking="hmm")))
    r.step("in-flight-finalize", lambda: p.finalize_in_flight(sid, entry["id"], assistant("Partial answer, now complete.", thinking="hmm")))
    aborted = r.step("in-flight-begin-again", lambda: p.begin_in_flight(sid, assistant("")))
    r.step("in-flight-abort", lambda: p.finalize_in_flight(sid, aborted["id"], status="aborted"))
    r.step("switch-to-label-entry", lambda: p.switch_leaf(sid, u1["id"]))
    r.step("archive-and-retitle", lambda: p.update_session(sid, status="archived", title="Kept for later"))
    r.sequence(
        "run",
        [
            lambda: p.append_message(sid, user("Run it again")),
            lambda: _stream(p, sid, [("Running", "Running ls"), ("done", None)]),
            lambda: p.append_message(sid, tool_result("call_2", "bash", "ok")),
            lambda: p.append_message(sid, assistant("Done.")),
        ],
    )
    return r.fixtures


def _stream(provider, sid: str, steps) -> dict:
    entry = provider.begin_in_flight(sid, assistant(""))
    for text, _ in steps[:-1]:
        provider.update_in_flight_entry(sid, entry["id"], assistant(text))
    return provider.finalize_in_flight(sid, entry["id"], assistant("Running ls", calls=[("call_2", "bash", {"command": "ls"})]))


def truncated(provider) -> list[dict]:
    """A snapshot that leaves entries out (``page.truncated``): walks stop at its window."""
    p = provider
    sid = p.create_session(cwd="/workspace").session_id
    first = p.append_message(sid, user("first"))
    for i in range(14):
        p.append_message(sid, assistant(f"reply {i}") if i % 2 else user(f"message {i}"))
    with override_settings(NETA_SNAPSHOT_ENTRY_LIMIT=10):
        r = Recorder(p, sid, "truncated", windowed=True)
        r.step("append-on-truncated-path", lambda: p.append_message(sid, assistant("one more")))
        r.step("leaf-outside-window", lambda: p.switch_leaf(sid, first["id"]))
        r.step("append-outside-window", lambda: p.append_message(sid, user("from the old start")))
        tip = p.get_snapshot(sid)["entries"][-2]["id"]
        r.step("leaf-back-inside", lambda: p.switch_leaf(sid, tip))
        r.step("label-outside-window", lambda: p.append_label_change(sid, target_id=first["id"], label="origin"))
    return r.fixtures


STORIES = (conversation, truncated)


def generate(provider) -> list[dict]:
    fixtures: list[dict] = []
    for story in STORIES:
        fixtures.extend(story(provider))
    return fixtures


def write(fixtures: list[dict], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for fixture in fixtures:
        path = directory / f"{fixture['name']}.json"
        path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def load(directory: Path = COMMITTED) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]
