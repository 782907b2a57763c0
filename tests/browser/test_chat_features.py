"""The chat page's everyday controls, in Chromium against a real Daphne:
versions inline, regenerate, edit in place, auto-title, slash /compact, the model and
thinking pickers, search, delete and archive, and a new session created on its first send.

Two page sessions walk all the steps (a page start costs more than a step). The pages
are drawn at 1440×900 and 390×844; ``NETA_WRITE_DOC_SCREENSHOTS=1`` also writes the
shots docs/chat.md shows (docs/screenshots/chat-*.png).
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support import browser as support
from tests.support.browser import Console, api, login, send, store_eval, wait_idle

pytestmark = pytest.mark.slow


# An agent of its own: compacts with little context (keep 1 token), and a second model
# that neither thinks nor takes images (the pickers respect that).
SETUP = """
from runtime.models import Agent, ModelConfig
base = ModelConfig.objects.get(name="browser-scripted")
ModelConfig.objects.update_or_create(name="browser-plain", defaults=dict(
    display_name="Plain scripted", provider_kind="scripted", provider_name="scripted", model_id="browser-plain",
    context_window=32000, max_output_tokens=2048, supports_thinking=False, supports_images=False, options=base.options))
Agent.objects.update_or_create(name="features", defaults=dict(model=base, workspace_mode="shared", restore_last_session=False,
    summarize_on_switch="ask", thinking_level="low", compaction_keep_recent_tokens=1, description="chat page features"))
"""


@pytest.fixture(scope="module")
def features_agent(server):
    server.python(SETUP)
    return "features"


def shot(page, artifacts, name: str) -> None:
    support.shot(page, artifacts, f"features-{name}", f"chat-{name}")


def answers(page):
    return page.locator(".stable-list .msg-assistant")


def user_entries(page, text: str) -> int:
    return store_eval(page, f"s.snapshot.entries.filter((e) => e.message?.role === 'user' && e.message.content?.[0]?.text === {json.dumps(text)}).length")


def no_summary(page) -> None:
    """Versions and edits are everyday moves: they never ask about a branch summary."""
    expect(page.get_by_role("dialog", name="Summarize the branch you are leaving?")).to_be_hidden()


DROP_IMAGE = """() => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M/AAAADAQGjoNP0AAAAAElFTkSuQmCC';
  const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], 'dot.png', {type: 'image/png'}));
  const form = document.querySelector('form.composer');
  for (const type of ['dragenter', 'dragover', 'drop']) form.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true, cancelable: true}));
}"""


# Opens the editor and, as soon as it is in the page, selects its text and (two frames on)
# types over the selection; answers the field's value.
TYPE_ON_OPEN = """(button) => new Promise((resolve) => {
  const seen = new MutationObserver(() => {
    const area = document.getElementById("edit-in-place-input");
    if (!area) return;
    seen.disconnect();
    area.select();
    requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => {
      document.execCommand("insertText", false, "typed at once");
      resolve(area.value);
    }, 50)));
  });
  seen.observe(document.body, {childList: true, subtree: true});
  button.click();
})"""

def test_versions_regenerate_edit_title_compact_and_pickers(browser, server, features_agent, artifacts):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url, path=f"/?agent={features_agent}")

    # The first answer, then the session names itself (the scripted model's title).
    send(page, "alpha about pruning quince trees")
    expect(answers(page)).to_contain_text("Noted: alpha about pruning quince trees")
    wait_idle(page)
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text("Alpha about pruning quince trees")
    expect(page.get_by_role("navigation", name="Sessions")).to_contain_text("Alpha about pruning quince trees")

    # Regenerate: a second answer beside the first, no second user message.
    first_answer = answers(page).first.get_attribute("data-entry-id")
    answers(page).first.get_by_role("button", name="Regenerate").click()
    expect(answers(page).first).not_to_have_attribute("data-entry-id", first_answer)
    wait_idle(page)
    second_answer = answers(page).first.get_attribute("data-entry-id")
    switcher = answers(page).first.get_by_role("group", name=re.compile("Version"))
    expect(switcher).to_have_accessible_name("Version 2 of 2")
    expect(switcher).to_contain_text("2/2")
    assert user_entries(page, "alpha about pruning quince trees") == 1
    expect(page.locator(".stable-list .msg-user")).to_have_count(1)
    shot(page, artifacts, "versions")

    # ‹ goes back to the first answer, through switch-leaf (no summary question).
    switcher.get_by_role("button", name="Previous version").click()
    no_summary(page)
    expect(answers(page).first).to_have_attribute("data-entry-id", first_answer)
    expect(answers(page).first.get_by_role("group", name="Version 1 of 2")).to_be_visible()
    assert store_eval(page, "s.snapshot.leafId") != second_answer

    # Edit in place: Escape gives up, Enter sends the edit as a sibling user message.
    user = page.locator(".stable-list .msg-user").first
    user.get_by_role("button", name="Edit").click()
    editor = page.get_by_label("Edit the message")
    editor.fill("this is thrown away")
    entries_before = store_eval(page, "s.snapshot.entries.length")
    editor.press("Escape")
    expect(editor).to_have_count(0)
    expect(user.locator(".user-text")).to_have_text("alpha about pruning quince trees")
    assert store_eval(page, "s.snapshot.entries.length") == entries_before
    # Keys typed the moment the editor opens replace its text as typed: the caret is placed
    # before the first paint, not a frame later under what was typed (a fast fill appended).
    typed = page.evaluate(TYPE_ON_OPEN, user.get_by_role("button", name="Edit").element_handle())
    assert typed == "typed at once"
    editor.press("Escape")
    expect(editor).to_have_count(0)
    user.get_by_role("button", name="Edit").click()
    editor.fill("alpha, asked about apple trees")
    shot(page, artifacts, "edit-in-place")
    editor.press("Enter")
    no_summary(page)
    expect(answers(page).first).to_contain_text("Noted: alpha, asked about apple trees")
    wait_idle(page)
    user = page.locator(".stable-list .msg-user").first
    expect(user.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    assert user_entries(page, "alpha about pruning quince trees") == 1
    user.get_by_role("button", name="Previous version").click()
    no_summary(page)
    expect(page.locator(".stable-list .msg-user").first.locator(".user-text")).to_have_text("alpha about pruning quince trees")
    expect(answers(page).first).to_have_attribute("data-entry-id", second_answer)  # the newest end of that version

    # /compact with completion: "/co" offers /compact, Tab completes, the instructions follow.
    page.fill("#composer-input", "/co")
    menu = page.get_by_role("listbox", name="Commands")
    expect(menu.get_by_role("option")).to_have_count(1)
    expect(menu).to_contain_text("/compact")
    shot(page, artifacts, "slash-menu")
    page.press("#composer-input", "Tab")
    expect(page.locator("#composer-input")).to_have_value("/compact ")
    page.type("#composer-input", "keep the fruit trees")
    page.press("#composer-input", "Enter")
    expect(page.locator("#composer-input")).to_have_value("")
    # What is sent while the compact request is out waits for it rather than being dropped:
    # an unknown command is then an error, not a message.
    send(page, "/frobnicate")
    expect(page.locator(".stable-list .msg-compaction")).to_be_visible()
    expect(page.locator(".composer .form-error")).to_contain_text("Unknown command /frobnicate", timeout=30_000)
    expect(page.locator(".notice-info")).to_contain_text("Context compacted.")
    assert user_entries(page, "/frobnicate") == 0

    # An image dropped on the composer is attached (and can be removed again).
    page.fill("#composer-input", "")
    page.evaluate(DROP_IMAGE)
    attached = page.get_by_role("list", name="Attached images")
    expect(attached.locator("img")).to_have_count(1)
    attached.get_by_role("button", name="Remove dot.png").click()
    expect(attached).to_have_count(0)

    # The pickers: a model without thinking or images disables the level; Attach then takes
    # documents only.
    files = page.get_by_label("Files to attach")
    expect(files).to_have_attribute("accept", re.compile("image/png"))
    page.get_by_label("Model for the next prompt").select_option("browser-plain")
    expect(page.get_by_label("Thinking level for the next prompt")).to_be_disabled()
    expect(page.get_by_role("button", name="Attach files")).to_be_visible()
    expect(files).not_to_have_attribute("accept", re.compile("image/png"))
    shot(page, artifacts, "pickers")
    send(page, "gamma on the plain model")
    expect(answers(page).last).to_contain_text("Noted: gamma on the plain model")
    wait_idle(page)
    expect(answers(page).last.locator(".model-name")).to_have_text("browser-plain")
    page.get_by_label("Model for the next prompt").select_option("browser-scripted")
    page.get_by_label("Thinking level for the next prompt").select_option("high")
    send(page, "delta thinking hard")
    expect(answers(page).last).to_contain_text("Noted: delta thinking hard")
    wait_idle(page)
    expect(page.locator(".stable-list .note-line", has_text="Thinking level: high")).to_have_count(1)
    expect(answers(page).last.locator(".model-name")).to_have_text("browser-scripted")
    # The choice is kept for this session across a reload.
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.get_by_label("Thinking level for the next prompt")).to_have_value("high")

    # A follow-up queued during a run is listed until the run takes it.
    send(page, "answer slowly please")
    expect(page.locator(".msg-streaming")).to_be_visible()
    send(page, "and after that, this")
    queued = page.get_by_role("list", name="Queued messages")
    expect(queued).to_contain_text("and after that, this")
    expect(queued).to_contain_text("Follow-up")
    shot(page, artifacts, "queued")
    expect(page.locator(".stable-list .msg-user").last).to_have_text(re.compile("and after that, this"), timeout=30_000)
    expect(queued).to_have_count(0)
    wait_idle(page)
    context.close()
    assert console.errors == [], console.errors


def test_search_delete_archive_and_a_session_made_on_first_send(browser, server, features_agent, artifacts):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url, path=f"/?agent={features_agent}")
    send(page, "a note on persimmon harvests in late autumn")
    wait_idle(page)
    keep = store_eval(page, "s.sessionId")

    # "New session" is a draft: nothing is stored until the first message.
    count = lambda: api(page, "GET", f"sessions/?agent={features_agent}&limit=200")["body"]["results"].__len__()  # noqa: E731
    before = count()
    page.get_by_role("button", name="+ New session").click()
    page.wait_for_url(re.compile(r"new=1"))
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.get_by_role("heading", level=1)).to_have_text("New session")
    assert count() == before
    page.get_by_role("button", name="+ New session").click()  # and again: still nothing left behind
    page.wait_for_selector("html[data-conversation-ready]")
    assert count() == before
    send(page, "the medlar question")
    page.wait_for_url(re.compile(r"/sessions/[0-9a-f-]{36}/$"))
    expect(answers(page)).to_contain_text("Noted: the medlar question")
    wait_idle(page)
    assert count() == before + 1
    doomed = store_eval(page, "s.sessionId")

    # Search: by message text (with the text around it) and by title.
    nav = page.get_by_role("navigation", name="Sessions")
    search = nav.get_by_label("Search sessions")
    search.fill("AUTUMN")  # not in the title (the first six words)
    hits = nav.get_by_role("list", name="Matching sessions")
    expect(hits.get_by_role("listitem")).to_have_count(1)
    expect(hits.locator(".session-snippet")).to_contain_text("persimmon harvests in late autumn")
    shot(page, artifacts, "search")
    search.fill("medlar question")  # its title
    expect(hits.get_by_role("listitem")).to_have_count(1)
    expect(hits.locator(".session-snippet")).to_have_count(0)
    expect(hits.get_by_role("link")).to_have_attribute("href", f"/sessions/{doomed}/")
    search.fill("no session says this")
    expect(nav.get_by_role("status")).to_have_text("No session matches.")
    search.press("Escape")
    expect(nav.get_by_role("list", name="Recent sessions")).to_be_visible()

    # Archive another session: confirmed, then gone from the list (kept on the server).
    row = nav.locator("li", has=page.locator(f'a[href="/sessions/{keep}/"]'))
    row.hover()
    row.get_by_role("button", name=re.compile("^Archive")).click()
    dialog = page.get_by_role("dialog", name="Archive this session?")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(row).to_have_count(1)
    row.get_by_role("button", name=re.compile("^Archive")).click()
    dialog.get_by_role("button", name="Archive").click()
    expect(row).to_have_count(0)
    assert api(page, "GET", f"sessions/{keep}/")["body"]["status"] == "archived"

    # Delete the session we are in: confirmed, then a new (draft) session opens.
    current = nav.locator("li", has=page.locator(f'a[href="/sessions/{doomed}/"]'))
    current.hover()
    current.get_by_role("button", name=re.compile("^Delete")).click()
    dialog = page.get_by_role("dialog", name="Delete this session?")
    expect(dialog).to_contain_text("You are in it now")
    shot(page, artifacts, "delete-confirm")
    dialog.get_by_role("button", name="Delete").click()
    page.wait_for_url(re.compile(r"new=1"))
    assert api(page, "GET", f"sessions/{doomed}/")["status"] == 404
    assert console.errors == ["console: Failed to load resource: the server responded with a status of 404 (Not Found)"]  # that GET
    context.close()

    # A phone: the same controls fit 390 px, nothing scrolls sideways.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = phone.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url, path=f"/sessions/{keep}/")
    expect(answers(page)).to_contain_text("persimmon")
    answers(page).first.get_by_role("button", name="Regenerate").click()
    expect(answers(page).first.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    wait_idle(page)
    page.get_by_label("Enter sends").uncheck()
    page.fill("#composer-input", "a line")
    page.press("#composer-input", "Enter")  # a new line now, not a send
    expect(page.locator("#composer-input")).to_have_value("a line\n")
    page.fill("#composer-input", "/")
    expect(page.get_by_role("listbox", name="Commands").get_by_role("option")).to_have_count(4)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    shot(page, artifacts, "phone")
    page.fill("#composer-input", "")
    page.get_by_role("button", name="Sessions").click()
    expect(page.get_by_label("Search sessions")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    shot(page, artifacts, "phone-sessions")
    phone.close()
    assert console.errors == [], console.errors
