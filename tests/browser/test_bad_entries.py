"""A session holding entries the page cannot draw, written into its file behind
the provider's back (as another program would): the chat page draws every entry
it can, marks each one it cannot with its id and type, and never blanks the
conversation."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.support.browser import Console, login

pytestmark = pytest.mark.slow

TS = "2026-01-01T00:00:00.000Z"


def message(entry_id: str, parent: str, message: dict) -> dict:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TS, "message": message}


def assistant(text: str, **extra) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop", "model": "m", "timestamp": 1, **extra}


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


# (id, the message or entry, what the page must show) — a good user message before each.
BAD = [
    ("bad00001", assistant("cost as text", usage={"input": 3, "output": 4, "cost": {"total": "0.5"}}), "drawn"),
    ("bad00002", {"role": "assistant", "content": [{"type": "text", "text": "before the hologram"}, {"type": "hologram", "beam": 1}, None], "stopReason": "stop"}, "blocks"),
    ("bad00003", {"role": "assistant", "content": "content that is not a list", "stopReason": "stop"}, "marked"),
    ("bad00004", {"content": [{"type": "text", "text": "who said this?"}]}, "marked"),
    ("bad00005", {"role": "assistant", "content": [{"type": "toolCall", "id": "call1", "name": "bash", "arguments": {"command": 5}}], "stopReason": "toolUse"}, "marked"),
    ("bad00006", assistant("half a pair \ud800 here"), "drawn"),
    ("bad00007", {"role": "assistant", "content": [{"type": "text", "text": "usage as text"}], "stopReason": "stop", "usage": "lots"}, "marked"),
]
COMPACTION = {"type": "compaction", "id": "bad00008", "summary": {"not": "text"}, "firstKeptEntryId": "good0001", "tokensBefore": 12, "timestamp": TS}

BUILD = """
import json
from django.contrib.auth import get_user_model
from pathlib import Path
from runtime.sessions.services import session_create
from sessions_tree.models import AgentSession
meta = session_create(actor=get_user_model().objects.get(username="alice"), agent_name="browser", title="bad entries")
lines = json.loads({lines!r})
meta = AgentSession.objects.get(pk=meta.pk)
lines[0] = lines[0].replace("ROOT", meta.leaf_entry_id)
path = Path(meta.session_file)
with path.open("a", encoding="utf-8") as fh:
    for line in lines:
        fh.write(line + "\\n")
AgentSession.objects.filter(pk=meta.pk).update(
    last_seq=path.stat().st_size, entry_count=meta.entry_count + len(lines), leaf_entry_id=json.loads(lines[-1])["id"]
)
print(json.dumps({{"sid": meta.session_id}}))
"""


def build_lines() -> list[str]:
    entries, parent = [], "ROOT"
    for i, (entry_id, bad, _) in enumerate(BAD, start=1):
        good = f"good{i:04d}"
        entries.append(message(good, parent, user(f"good question {i}")))
        entries.append(message(entry_id, good, bad) if "role" in bad or "content" in bad else {**bad, "id": entry_id, "parentId": good})
        parent = entry_id
    entries.append({**COMPACTION, "parentId": parent})
    entries.append(message("good9999", COMPACTION["id"], assistant("the last good answer")))
    # json.dumps escapes the lone surrogate as \\ud800, as JSON.stringify does.
    return [json.dumps(e) for e in entries]


def test_bad_entries_are_marked_and_the_rest_is_drawn(browser, server, artifacts):
    made = json.loads(server.python(BUILD.format(lines=json.dumps(build_lines()))).strip().splitlines()[-1])
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    warnings: list[str] = []
    page.on("console", lambda m: m.type == "warning" and warnings.append(m.text))
    login(page, server.base_url, path=f"/sessions/{made['sid']}/")
    try:
        listing = page.locator(".stable-list")
        # Every good message is drawn …
        for i in range(1, len(BAD) + 1):
            expect(listing.locator(".msg-user", has_text=f"good question {i}")).to_have_count(1)
        expect(listing.locator(".msg-assistant", has_text="the last good answer")).to_have_count(1)
        # … so are the bad ones that can be drawn, with what cannot be shown left out or marked in place.
        cost = listing.locator('[data-entry-id="bad00001"]')
        expect(cost).to_contain_text("cost as text")
        expect(cost.locator(".usage")).to_contain_text("$?")
        blocks = listing.locator('[data-entry-id="bad00002"]')
        expect(blocks).to_contain_text("before the hologram")
        expect(blocks.locator("[data-unrenderable-block]")).to_have_count(2)
        expect(blocks.locator("[data-unrenderable-block]").first).to_contain_text("hologram")
        expect(listing.locator('[data-entry-id="bad00006"]')).to_contain_text("half a pair \ufffd here")
        # The ones that cannot: marked, one by one, with id and type.
        for entry_id, _, how in BAD:
            marked = listing.locator(f'[data-entry-id="{entry_id}"][data-unrenderable]')
            expect(marked).to_have_count(1 if how == "marked" else 0)
            if how == "marked":
                expect(marked).to_contain_text("This entry could not be shown")
                expect(marked).to_contain_text(entry_id)
                expect(marked).to_contain_text("message/")
        expect(listing.locator('[data-entry-id="bad00004"]')).to_contain_text("message/?")
        expect(listing.locator('[data-entry-id="bad00004"]')).to_contain_text("no role")
        expect(listing.locator('[data-entry-id="bad00005"]')).to_contain_text("drawing it failed")
        compaction = listing.locator('[data-entry-id="bad00008"][data-unrenderable]')
        expect(compaction).to_contain_text("compaction")
        # Nothing blanked: no panel failed, the tree lists every entry, the composer works.
        expect(page.locator("[data-panel-failed]")).to_have_count(0)
        page.wait_for_selector("html[data-tree-ready]")
        expect(page.locator(".tree-row", has_text="the last good answer")).to_have_count(1)
        # The page still takes a prompt and draws what follows. (Whether the model call
        # survives this context is the runtime's business: today a `null` block breaks it.)
        page.fill("#composer-input", "still works")
        page.press("#composer-input", "Enter")
        expect(listing.locator(".msg-user", has_text="still works")).to_have_count(1)
        page.wait_for_function("() => !window.neta.store.running", timeout=30_000)
        expect(page.locator("[data-panel-failed]")).to_have_count(0)
        page.screenshot(path=str(artifacts / "bad-entries.png"), full_page=False)
        assert console.errors == [], console.errors
        assert any("bad00005" in w for w in warnings), warnings  # the caught failure is logged, as a warning
    finally:
        context.close()
