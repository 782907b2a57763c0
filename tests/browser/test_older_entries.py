"""A session longer than the snapshot: older entries are paged into the tree on demand."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import Console, Site, login, store_eval

pytestmark = pytest.mark.slow

# 40 entries: a 30-message conversation with a 10-message branch off its second answer,
# then the leaf moved back to the end of the main line. The snapshot ships 10.
BUILD = """
import json
from django.contrib.auth import get_user_model
from runtime.sessions.services import session_create
from sessions_tree.providers import get_provider
meta = session_create(actor=get_user_model().objects.get(username="alice"), agent_name="browser", title="long")
provider = get_provider(meta.provider)
sid = meta.session_id
def say(role, text, parent=None):
    message = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1700000000000}
    if role == "assistant":
        message.update(api="x", provider="scripted", model="browser-scripted", stopReason="stop",
                       usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2})
    return provider.append_message(sid, message, parent_id=parent) if parent else provider.append_message(sid, message)
ids = []
for i in range(15):
    ids.append(say("user", f"main question {i}")["id"])
    ids.append(say("assistant", f"main answer {i}")["id"])
provider.switch_leaf(sid, ids[3])
for i in range(5):
    say("user", f"side question {i}")
    say("assistant", f"side answer {i}")
provider.switch_leaf(sid, ids[-1])
print(json.dumps({"sid": sid, "total": len(provider.list_entries(sid))}))
"""


@pytest.fixture(scope="module")
def long_session(browser_deployment):
    """A server of its own on the browser deployment, whose snapshots ship 10 entries."""
    server = Site(browser_deployment, "paged").start(NETA_SNAPSHOT_ENTRY_LIMIT="10")
    made = json.loads(server.python(BUILD).strip().splitlines()[-1])
    return server, made


@pytest.fixture
def long_page(browser, long_session, artifacts, request):
    """Alice's page on the long session; the console must stay clean."""
    server, made = long_session
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url, path=f"/sessions/{made['sid']}/")
    yield page, made
    page.screenshot(path=str(artifacts / f"{request.node.name}-end.png"))
    context.close()
    assert console.errors == [], console.errors


def test_older_entries_are_paged_into_the_tree(long_page, artifacts):
    page, made = long_page
    page.wait_for_selector("html[data-tree-ready]")
    total = made["total"]
    sent = store_eval(page, "s.snapshot.page")
    assert sent["totalEntries"] == total and sent["truncated"] and sent["activePathTruncated"] and sent["limit"] == 10
    shown = sent["includedEntries"]  # the newest ten, and the newest ten of the active path
    earlier = page.locator(".stable-list .earlier")
    expect(earlier).to_contain_text(f"Older entries of this path are not loaded ({sent['activePathLength']} in all)")
    expect(page.locator(".stable-list .msg-user", has_text="main question 0")).to_have_count(0)
    older = page.locator(".tree-older")
    expect(older).to_contain_text(f"{total - shown} older not shown")
    # The side branch is the newest ten entries; where it starts, and the start of the
    # main line, are older than the snapshot.
    expect(page.locator(".tree-row", has_text="main question 0")).to_have_count(0)
    expect(page.locator(".tree-row", has_text="side question 0")).to_have_count(1)
    expect(page.locator(".tree-row .branch-badge")).to_have_count(0)
    page.get_by_role("button", name="Load older entries").click()  # the whole rest fits one page of 500
    expect(older).to_have_count(0)
    # Its model, thinking-level and name entries are folded (bookkeeping).
    expect(page.locator(".tree-count")).to_have_text(f"{total - 3} of {total} entries")
    expect(page.locator(".tree-row", has_text="main question 0")).to_have_count(1)
    # The side branch hangs off "main answer 1": a branch point with two children.
    branch = page.locator(".tree-row", has_text="main answer 1").first
    expect(branch.locator(".branch-badge")).to_have_text("⎇ 2")
    # The whole active path is marked again, down from the first question.
    expect(page.locator(".tree-row.on-path", has_text="main question 0")).to_have_count(1)
    expect(page.locator(".tree-row.on-path", has_text="side question")).to_have_count(0)
    # The conversation now reaches the first question too.
    expect(earlier).to_have_count(0)
    expect(page.locator(".stable-list .msg-user").first).to_have_text(re.compile("main question 0"))
    expect(page.locator(".stable-list .msg-user")).to_have_count(15)
    # What the server sent is untouched by the paging.
    assert store_eval(page, "s.snapshot.entries.length") == shown
    page.screenshot(path=str(artifacts / "tree-older-loaded.png"))


def test_the_conversation_loads_its_older_messages_itself(long_page):
    page, _ = long_page
    first_shown = page.locator(".stable-list .msg-user").first.inner_text()
    assert "main question 0" not in first_shown
    page.get_by_role("button", name="Load older messages").click()
    expect(page.locator(".stable-list .msg-user").first).to_have_text(re.compile("main question 0"))
    expect(page.get_by_role("button", name="Load older messages")).to_have_count(0)


def test_going_to_a_paged_in_entry_moves_the_leaf_there(long_page, artifacts):
    page, _ = long_page
    page.wait_for_selector("html[data-tree-ready]")
    page.get_by_role("button", name="Load older entries").click()
    # The older page arrives over REST: keys pressed before it is drawn move in the old rows.
    expect(page.locator(".tree-older")).to_have_count(0)
    expect(page.locator(".tree-row", has_text="main question 0")).to_have_count(1)
    tree = page.get_by_role("tree", name="Entries of this session")
    tree.focus()
    tree.press("Home")  # the conversation from its first question (model, thinking level and name are folded)
    for _ in range(3):
        tree.press("ArrowDown")
    expect(page.locator(".tree-row.selected .row-text")).to_have_text("main answer 1")
    page.get_by_role("button", name="Go here").click()
    dialog = page.get_by_role("dialog", name="Summarize the branch you are leaving?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Switch without summary").click()
    # The leaf is outside the old snapshot's window: the page takes a fresh snapshot.
    expect(page.locator(".stable-list .msg-assistant").last).to_have_text(re.compile(r"main answer 1\b"))
    expect(page.locator(".stable-list .msg-user")).to_have_count(2)
    expect(page.locator(".tree-row.is-leaf .row-text")).to_have_text("main answer 1")
    page.screenshot(path=str(artifacts / "older-go-here.png"))
