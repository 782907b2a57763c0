"""The chat page used for real, in Chromium against the real Daphne: the everyday moves
(versions, edits, regenerate never ask about a summary; the tree asks for a long branch),
one answer as one card, the plan after its run, following a send, a partly cancelled
delegate batch, target sizes, moves during a run, the tree's bookkeeping, titles, queued
follow-ups after a reload, phones, forks at a prompt, the status bar's words, contrast and
announcements; and what the page adds: documents, export and share links, search, pins
and date groups, continue, feedback, custom instructions.

Every test here failed on the page before these changes (each says what it checks).
Screenshots: test-artifacts/browser/everyday-*.png (with NETA_WRITE_DOC_SCREENSHOTS=1 also
docs/screenshots/chat-everyday-*.png)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import Console, api, login, send, shot, store_eval, wait_idle
from tests.support.deployment import PASSWORD
from tests.support.documents import tiny_pdf

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
TODO_DONE = [{"content": "Look at the workspace", "status": "completed"}, {"content": "Write the answer", "status": "completed"}]
LONG_TABLE = "| name | **size** |\n|---|---|\n| notes.md | 1 KB |"

RULES = {
    "version": 1,
    "chunk_size": 6,
    "delay_ms": 10,
    "rules": [
        {"match": {"system": "(?i)summariz"}, "reply": [{"text": "Summary of the branch left."}]},
        {"match": {"system": "Always answer like a pirate"}, "reply": [{"text": "Arr, noted: {{user}}"}]},
        {"match": {"contains": "make a plan"}, "replies": [
            [{"text": "My plan:"}, {"tool_call": {"name": "todo", "arguments": {"todos": TODO_DONE}}}],
            [{"text": "Planned and done."}],
        ]},
        {"match": {"contains": "three helpers"}, "replies": [
            [{"text": "Three subagents."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "everyday", "task": "quick helper one"},
                {"agent": "everyday", "task": "quick helper two"},
                {"agent": "everyday", "task": "slow helper three"},
            ]}}}],
            [{"text": "The helpers reported back."}],
        ]},
        {"match": {"contains": "quick helper"}, "reply": [{"text": "Quick and done."}]},
        {"match": {"contains": "slow helper"}, "reply": [{"text": "Slowly."}, {"pause_ms": 120000}, {"text": "never"}]},
        {"match": {"contains": "several steps"}, "replies": [
            [{"thinking": "Look first.", "chunk_size": 8}, {"text": "Let me look."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}],
            [{"text": "And check a folder that is not there."}, {"tool_call": {"name": "bash", "arguments": {"command": "ls /no-such-folder-here"}}}],
            [{"text": "The workspace holds **notes.md** and `src/`."}],
        ]},
        {"match": {"contains": "cut off at the output limit"}, "reply": [{"text": " and here is the rest of it."}]},
        {"match": {"contains": "long answer"}, "reply": {"steps": [{"text": "The first part of a long answer"}], "stop_reason": "length"}},
        {"match": {"contains": "table please"}, "reply": [{"text": LONG_TABLE}]},
        {"match": {"contains": "slowly"}, "reply": [{"text": " ".join(f"Line {i} of a slow answer." for i in range(60)), "chunk_size": 6, "delay_ms": 25}]},
        {"match": {"contains": "forever"}, "reply": [{"text": "Counting: " + "and one more, " * 600, "chunk_size": 4, "delay_ms": 40}]},
    ],
    "default": {"reply": [{"text": "Noted: {{user}}"}]},
}

SETUP = """
import json
from django.contrib.auth import get_user_model
from runtime.models import Agent, ModelConfig
rules = json.loads({rules!r})
model, _ = ModelConfig.objects.update_or_create(
    name="everyday-scripted",
    defaults=dict(display_name="Everyday scripted", provider_kind="scripted", provider_name="scripted", model_id="everyday-scripted",
                  context_window=64000, max_output_tokens=4096, supports_thinking=True, supports_images=True,
                  price_input=1, price_output=2, options={{"rules": rules}}),
)
# summarize_on_switch left to its default: what a new agent (and the default agent) gets.
Agent.objects.filter(name="everyday").delete()
Agent.objects.create(name="everyday", model=model, workspace_mode="shared", restore_last_session=False, description="everyday use",
    subagent_policy={{"enabled": True, "agents": ["everyday"], "child_budget": {{"idle_seconds": 60}}}})
Agent.objects.update_or_create(name="everyday-other", defaults=dict(model=model, workspace_mode="shared", restore_last_session=False, description="another agent"))
U = get_user_model()
if not U.objects.filter(username="stafford").exists():
    U.objects.create_superuser("stafford", password={password!r})
"""


@pytest.fixture(scope="module")
def everyday(server):
    server.python(SETUP.format(rules=json.dumps(RULES), password=PASSWORD))
    return "everyday"


def everyday_shot(page, artifacts, name: str) -> None:
    shot(page, artifacts, f"everyday-{name}", f"chat-everyday-{name}")


def open_page(browser, server, viewport=DESKTOP, agent="everyday", **context):
    ctx = browser.new_context(viewport=viewport, **context)
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    page.console = Console(page)
    login(page, server.base_url, path=f"/?agent={agent}")
    return ctx, page


def answers(page):
    return page.locator(".stable-list .msg-assistant")


def said(page, prompt: str, reply: str) -> None:
    page.fill("#composer-input", prompt)
    page.get_by_role("button", name="Send", exact=True).click()  # Enter is a new line on touch screens
    expect(answers(page).last).to_contain_text(reply)
    wait_idle(page)


def staff_login(page, server) -> None:
    page.goto(server.base_url + "/login/")
    page.fill("#id_username", "stafford")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/(sessions/.*)?$"))


def dialog(page):
    return page.get_by_role("dialog", name="Summarize the branch you are leaving?")


def tree_row(page, text: str):
    return page.locator(".tree-row", has_text=text)


def test_everyday_moves_never_ask_and_the_tree_asks_for_a_long_branch(browser, server, everyday, artifacts):
    """Before: the default agent's `ask` opened the summary dialog on every ‹ ›, every
    "Save and send" and the tree's Go here on a prompt."""
    ctx, page = open_page(browser, server)
    assert api(page, "GET", "agents/everyday/")["body"]["summarizeOnSwitch"] == "ask_long"
    said(page, "first question", "Noted: first question")
    first = answers(page).first.get_attribute("data-entry-id")
    answers(page).first.get_by_role("button", name="Regenerate").click()
    expect(answers(page).first).not_to_have_attribute("data-entry-id", first)
    wait_idle(page)
    answers(page).first.get_by_role("button", name="Previous version").click()
    expect(answers(page).first).to_have_attribute("data-entry-id", first)
    expect(dialog(page)).to_be_hidden()
    # An edit ("Save and send") never asks either.
    user = page.locator(".stable-list .msg-user").first
    user.get_by_role("button", name="Edit").click()
    page.locator("#edit-in-place-input").fill("first question, edited")
    page.get_by_role("button", name="Save and send").click()
    expect(answers(page).last).to_contain_text("Noted: first question, edited")
    wait_idle(page)
    expect(dialog(page)).to_be_hidden()
    # A long branch (three exchanges), then the tree's Go here back to the first answer: asked.
    for n in ("two", "three"):
        said(page, f"more {n}", f"Noted: more {n}")
    tree_row(page, "Noted: first question").first.click()
    page.get_by_role("button", name="Go here").click()
    expect(dialog(page)).to_be_visible()
    expect(dialog(page)).to_contain_text("holds 6 messages")
    everyday_shot(page, artifacts, "summary-asked")
    dialog(page).get_by_role("button", name="Switch without summary").click()
    expect(answers(page).last).to_contain_text("Noted: first question")
    wait_idle(page)
    # A short branch (one exchange left behind) moves without asking.
    said(page, "a short detour", "Noted: a short detour")
    tree_row(page, "Noted: first question, edited").click()
    page.get_by_role("button", name="Go here").click()
    expect(answers(page).last).to_contain_text("Noted: first question, edited")
    expect(dialog(page)).to_be_hidden()
    ctx.close()
    assert page.console.errors == []


def test_one_answer_is_one_card_and_a_tool_error_shows_its_command_once(browser, server, everyday, artifacts):
    """Before: a turn of three model calls was three cards, each with Regenerate and Continue;
    a failed `bash` card showed its command in the summary and again in the body."""
    ctx, page = open_page(browser, server)
    said(page, "do this in several steps", "The workspace holds")
    expect(answers(page)).to_have_count(1)
    card = answers(page).first
    expect(card.get_by_role("button", name="Regenerate")).to_have_count(1)
    expect(card.get_by_role("button", name="Continue from here")).to_have_count(1)
    steps = card.locator("details.steps")
    expect(steps.locator(":scope > summary")).to_contain_text("4 steps")
    expect(steps.locator(":scope > summary")).to_contain_text("1 error")
    expect(steps).not_to_have_attribute("open", "")  # folded: the answer is there
    expect(card.locator(".markdown strong")).to_have_text("notes.md")
    steps.locator(":scope > summary").click()
    bash = card.locator(".tool-card[data-tool=bash]")
    expect(bash).to_have_attribute("open", "")  # an error stays open
    assert bash.inner_text().count("ls /no-such-folder-here") == 1
    everyday_shot(page, artifacts, "one-card")
    # The tree still has every entry, and selecting a tool result shows the card.
    tree_row(page, "bash:").click()
    expect(card).to_have_class(re.compile("revealed"))
    ctx.close()
    assert page.console.errors == []


def test_a_finished_plan_is_not_pinned_after_its_run(browser, server, everyday, artifacts):
    """Before: a finished plan stayed pinned above the composer through every later turn."""
    ctx, page = open_page(browser, server)
    said(page, "make a plan", "Planned and done.")
    expect(page.locator(".plan-panel")).to_have_count(0)
    steps = answers(page).last.locator("details.steps > summary")
    expect(steps).to_contain_text("todo")
    steps.click()  # the finished plan stays in its todo card
    expect(page.locator(".stable-list .tool-card[data-tool=todo]")).to_contain_text("2 of 2 done")
    said(page, "and now something else", "Noted: and now something else")
    expect(page.locator(".plan-panel")).to_have_count(0)
    ctx.close()
    assert page.console.errors == []


def test_sending_while_scrolled_up_follows_the_answer(browser, server, everyday, artifacts):
    """Before: a message sent while scrolled up streamed its answer out of view."""
    ctx, page = open_page(browser, server, viewport={"width": 1200, "height": 600})
    for n in range(6):
        said(page, f"filler {n} " + "words " * 40, f"Noted: filler {n}")
    page.locator(".conversation").evaluate("(el) => el.scrollTo(0, 0)")
    expect(page.locator(".jump-latest")).to_be_visible()
    send(page, "answer slowly please")
    page.wait_for_function("() => (document.querySelector('.msg-streaming')?.textContent ?? '').includes('Line 5 ')")
    expect(page.locator(".jump-latest")).to_have_count(0)
    gap = page.locator(".conversation").evaluate("(el) => el.scrollHeight - el.scrollTop - el.clientHeight")
    assert gap < 40, gap
    wait_idle(page)
    ctx.close()


def test_cancelling_one_child_makes_the_batch_partial_not_an_error(browser, server, everyday, artifacts):
    """Before: cancelling one of three children turned the delegate card red ("✗ error")
    and struck the batch through in the tree, though two had completed."""
    ctx, page = open_page(browser, server)
    send(page, "ask three helpers")
    slow = page.locator(".subagent-row", has_text="slow helper three")
    expect(slow).to_have_attribute("data-status", "running", timeout=60_000)
    expect(page.locator(".subagent-row[data-status=completed]")).to_have_count(2, timeout=60_000)
    slow.get_by_role("button", name=re.compile("Cancel")).click()
    expect(answers(page).last).to_contain_text("The helpers reported back.", timeout=60_000)
    wait_idle(page)
    answers(page).last.locator("details.steps > summary").click()  # the delegate call is a step; its batch panel shows anyway
    expect(answers(page).last.locator("details.steps > summary")).not_to_contain_text("error")
    card = page.locator(".stable-list .tool-card[data-tool=delegate_parallel]")
    expect(card.locator(".tool-status")).not_to_contain_text("error")
    expect(card.locator(".tool-status")).to_contain_text("partial")
    badge = page.locator(".tree-row.kind-subagent_batch .state-badge")
    expect(badge).to_have_text("partial")
    assert "line-through" not in badge.evaluate("(el) => getComputedStyle(el).textDecorationLine")
    expect(page.locator(".stable-list .subagent-panel")).to_have_attribute("data-state", "partial")
    everyday_shot(page, artifacts, "partial-batch")
    ctx.close()


def test_targets_are_large_enough_and_moves_wait_for_the_run(browser, server, everyday, artifacts):
    """Before: ‹ › were 18×19 px, and Edit, Regenerate and ‹ › stayed enabled during a run
    (then refused with "before moving in the tree")."""
    ctx, page = open_page(browser, server)
    said(page, "pick a version", "Noted: pick a version")
    answers(page).first.get_by_role("button", name="Regenerate").click()
    wait_idle(page)
    expect(answers(page).first.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    for button in page.locator(".msg-actions button, .version-step").all():
        box = button.bounding_box()
        assert box["width"] >= 24 and box["height"] >= 24, (button.inner_text(), box)
    send(page, "count forever")
    expect(page.locator(".msg-streaming")).to_be_visible()
    previous = answers(page).first.get_by_role("button", name="Previous version")
    expect(previous).to_be_disabled()
    expect(page.locator(".stable-list .msg-user").first.get_by_role("button", name="Edit")).to_be_disabled()
    expect(answers(page).first.get_by_role("button", name="Regenerate")).to_be_disabled()
    page.get_by_role("button", name="Abort").click()
    wait_idle(page)
    expect(previous).to_be_enabled()
    ctx.close()
    # On a touch screen the arrows are finger-sized.
    ctx, page = open_page(browser, server, viewport=PHONE, has_touch=True, is_mobile=True)
    said(page, "pick a version on the phone", "Noted: pick a version on the phone")
    answers(page).first.get_by_role("button", name="Regenerate").click()
    wait_idle(page)
    box = answers(page).first.get_by_role("button", name="Previous version").bounding_box()
    assert box["width"] >= 44 and box["height"] >= 44, box
    ctx.close()


def test_the_tree_folds_bookkeeping_and_rows_are_plain_text(browser, server, everyday, artifacts):
    """Before: the title (`name: …`), renames, labels and thinking changes were rows of their
    own and took the leaf mark; rows showed table pipes and `**`."""
    ctx, page = open_page(browser, server)
    said(page, "table please", "notes.md")
    page.get_by_label("Thinking level for the next prompt").select_option("high")
    said(page, "after the thinking change", "Noted: after the thinking change")
    tree_row(page, "after the thinking change").first.click()
    page.get_by_role("button", name="Label").click()
    page.get_by_placeholder("Label (empty clears it)").fill("keep")
    page.get_by_placeholder("Label (empty clears it)").press("Enter")
    expect(page.locator(".tree-row .row-label")).to_have_text("keep")
    for kind in ("session_info", "label", "thinking_level_change", "model_change"):
        expect(page.locator(f".tree-row.kind-{kind}")).to_have_count(0)
    expect(page.locator(".tree-row.is-leaf")).to_have_class(re.compile("kind-assistant"))
    expect(page.locator(".tree-row.kind-assistant").first.locator(".row-text")).to_have_text("name · size notes.md · 1 KB")
    everyday_shot(page, artifacts, "tree-folded")
    page.get_by_role("button", name="Notes").click()
    expect(page.locator(".tree-row.kind-label")).to_have_count(1)
    expect(page.locator(".tree-row.kind-session_info")).to_have_count(1)
    ctx.close()
    assert page.console.errors == []


def test_titles_are_cut_where_they_read_well(browser, server, everyday, artifacts):
    """Before: "What is in my workspace? Give" (six words, across a sentence's end); a
    sentence without spaces (Chinese) became a title of any length."""
    ctx, page = open_page(browser, server)
    said(page, "What is up with my notes? Give me a short overview.", "Noted:")
    expect(page.get_by_role("heading", level=1)).to_have_text("What is up with my notes")
    ctx.close()
    ctx, page = open_page(browser, server)
    said(page, "请告诉我工作区里有哪些文件以及每个文件的用途和大小", "Noted:")
    title = page.get_by_role("heading", level=1).inner_text()
    assert len(title) <= 17 and title.startswith("请告诉我") and title.endswith("…"), title
    ctx.close()


def test_a_queued_follow_up_is_still_listed_after_a_reload(browser, server, everyday, artifacts):
    """Before: the queued follow-up vanished from the list on reload (it still ran)."""
    ctx, page = open_page(browser, server)
    send(page, "count forever")
    expect(page.locator(".msg-streaming")).to_be_visible()
    send(page, "and then this follow-up")
    queued = page.get_by_role("list", name="Queued messages")
    expect(queued).to_contain_text("and then this follow-up")
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(queued).to_contain_text("and then this follow-up")
    page.get_by_role("button", name="Abort").click()
    wait_idle(page, timeout=60_000)
    ctx.close()


def test_phone_gives_the_conversation_the_height(browser, server, everyday, artifacts):
    """Before: at 390 × 844 the status bar, composer, pickers and hints took ~255 px; the tree
    drawer stayed over the conversation after a row tap; "Press ?" showed on a touch screen."""
    ctx, page = open_page(browser, server, viewport=PHONE, has_touch=True, is_mobile=True)
    expect(page.locator(".keys-hint")).to_be_hidden()
    said(page, "hello from the phone", "Noted: hello from the phone")
    chrome = page.evaluate(
        "() => ['.status-bar', '.composer'].reduce((n, s) => n + document.querySelector(s).getBoundingClientRect().height, 0)"
    )
    print(f"phone: status bar and composer {chrome:.0f} px of 844")
    assert chrome <= 150, chrome
    everyday_shot(page, artifacts, "phone")
    page.locator(".tree-toggle").tap()
    expect(page.locator(".tree-sidebar")).to_be_visible()
    tree_row(page, "hello from the phone").first.tap()
    expect(page.locator(".tree-sidebar")).to_have_count(0)
    expect(page.locator(".stable-list .msg-user", has_text="hello from the phone")).to_be_in_viewport()
    ctx.close()
    assert page.console.errors == []


def test_fork_at_a_prompt_gives_the_prompt_back(browser, server, everyday, artifacts):
    """Before: forking at a user message left a session ending in that unanswered prompt,
    and the next send made two user messages in a row."""
    ctx, page = open_page(browser, server)
    said(page, "alpha", "Noted: alpha")
    said(page, "beta", "Noted: beta")
    tree_row(page, "beta").first.click()
    old = page.url
    page.get_by_role("button", name="Fork").click()
    page.wait_for_url(lambda url: url != old and "/sessions/" in url)
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.locator(".stable-list .msg-user")).to_have_count(1)  # alpha only
    expect(page.locator("#composer-input")).to_have_value("beta")
    page.press("#composer-input", "Enter")
    expect(answers(page).last).to_contain_text("Noted: beta")
    wait_idle(page)
    roles = store_eval(page, "s.snapshot.activePath.map((id) => s.entry(id)).filter((e) => e.type === 'message').map((e) => e.message.role)")
    assert roles == ["user", "assistant", "user", "assistant"], roles
    ctx.close()


def test_status_bar_words_compact_aborted_tokens_announcements_and_contrast(browser, server, everyday, artifacts):
    """Before: "sandbox: bwrap · Run: idle · live" in the everyday view; Compact enabled at 0
    tokens; an aborted answer showed ↓0 output tokens though text streamed; answers were
    not announced (`aria-live=off` only); the "done" badge was 4.07:1 at 12 px."""
    ctx, page = open_page(browser, server)
    expect(page.get_by_role("button", name="Compact")).to_be_disabled()
    bar = page.locator(".status-bar")
    said(page, "say hello", "Noted: say hello")
    for jargon in ("sandbox:", "Run:", "idle", "live"):
        expect(bar).not_to_contain_text(jargon)
    expect(page.locator("[data-announcer]")).to_have_text("Answer: Noted: say hello")
    send(page, "count forever")
    page.wait_for_function("() => (document.querySelector('.msg-streaming')?.textContent ?? '').length > 60")
    page.get_by_role("button", name="Abort").click()
    wait_idle(page)
    usage = answers(page).last.locator(".usage")
    expect(usage).to_contain_text("↓~")
    expect(page.locator("[data-announcer]")).to_contain_text("The answer was aborted")
    said(page, "make a plan", "Planned and done.")
    failures = page.evaluate(CONTRAST_SWEEP)
    assert failures == [], failures
    ctx.close()


# Every visible text on the page against its background: 4.5:1 (3:1 from 24 px, or 18.7 px bold).
CONTRAST_SWEEP = """() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null; const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = ({r, g, b}) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, bottom) => ({r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a), b: top.b * top.a + bottom.b * (1 - top.a), a: 1});
  const background = (el) => { const layers = []; for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; } } let bg = {r: 255, g: 255, b: 255, a: 1}; for (const c of layers.reverse()) bg = over(c, bg); return bg; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (!el.offsetParent && getComputedStyle(el).position !== 'fixed') continue;
    if (el.closest('.hljs, .katex, [aria-hidden=true], .visually-hidden, button:disabled, select:disabled, textarea:disabled')) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || Number(style.opacity) < 1) continue;
    const fg = parse(style.color); if (!fg) continue;
    const bg = background(el);
    const a = lum(over(fg, bg)), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return out;
}"""


def network_requests(page):
    """Requests that went to the network (a memory or disk cache hit does not count), by CDP."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    seen: dict[str, dict] = {}

    def sent(event):
        seen[event["requestId"]] = {"url": event["request"]["url"], "cached": False, "bytes": 0}

    def cached(event):
        if event["requestId"] in seen:
            seen[event["requestId"]]["cached"] = True

    def received(event):
        item = seen.get(event["requestId"])
        if item is not None and (event["response"].get("fromDiskCache") or event["response"].get("fromPrefetchCache")):
            item["cached"] = True

    def finished(event):
        item = seen.get(event["requestId"])
        if item is not None:
            item["bytes"] = event.get("encodedDataLength", 0)

    cdp.on("Network.requestWillBeSent", sent)
    cdp.on("Network.requestServedFromCache", cached)
    cdp.on("Network.responseReceived", received)
    cdp.on("Network.loadingFinished", finished)
    return lambda: [r for r in seen.values() if not r["cached"]]


def test_a_page_load_is_few_requests_with_long_lived_caching(browser, server, everyday, artifacts):
    """Before: 87 requests a load (every module and every highlight.js language, unbundled)
    and no Cache-Control or ETag on static files."""
    ctx, page = open_page(browser, server)
    said(page, "a message to load", "Noted: a message to load")
    url = page.url
    state = ctx.storage_state()
    ctx.close()
    cold_ctx = browser.new_context(viewport=DESKTOP, storage_state=state)
    page = cold_ctx.new_page()
    taken = network_requests(page)
    page.goto(url)
    page.wait_for_selector("html[data-tree-ready]")
    expect(page.locator(".stable-list .msg-assistant")).to_contain_text("Noted: a message to load")
    page.wait_for_load_state("networkidle")
    cold = taken()
    statics = [r for r in cold if "/static/" in r["url"]]
    assert len(cold) <= 25, [r["url"] for r in cold]
    assert any("/static/chat/bundle." in r["url"] for r in statics), [r["url"] for r in statics]
    assert not any("/highlight/languages/" in r["url"] for r in cold)  # no code block: no language loaded
    head = page.request.get(statics[0]["url"])
    assert "immutable" in head.headers["cache-control"] and head.headers.get("etag"), head.headers
    print(f"cold load: {len(cold)} requests, {sum(r['bytes'] for r in cold)} bytes")
    taken = network_requests(page)
    page.goto(url)
    page.wait_for_selector("html[data-tree-ready]")
    page.wait_for_load_state("networkidle")
    warm = taken()
    assert len(warm) <= 5, [r["url"] for r in warm]
    assert not any("/static/" in r["url"] for r in warm)
    print(f"warm load: {len(warm)} requests, {sum(r['bytes'] for r in warm)} bytes")
    cold_ctx.close()


# --------------------------------------------------------------------------- what the peers have


def test_documents_are_attached_read_and_shown_as_chips(browser, server, everyday, artifacts, tmp_path):
    ctx, page = open_page(browser, server)
    (tmp_path / "notes.md").write_text("# Notes\n\nThe **quince** needs pruning in March.\n", encoding="utf-8")
    (tmp_path / "figures.pdf").write_bytes(tiny_pdf("Quarterly figures: 42 apples"))
    (tmp_path / "archive.zip").write_bytes(b"PK\x03\x04" + bytes(200))
    page.fill("#composer-input", "what do these say?")
    page.get_by_label("Files to attach").set_input_files([str(tmp_path / n) for n in ("notes.md", "figures.pdf", "archive.zip")])
    expect(page.locator(".composer .form-error")).to_contain_text("archive.zip: only PDF, text, markdown and code files")
    pending = page.get_by_role("list", name="Documents to send")
    expect(pending.locator(".file-chip")).to_have_count(2)
    expect(page.locator("#composer-input")).to_have_value("what do these say?")  # nothing lost
    everyday_shot(page, artifacts, "documents-pending")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(answers(page).last).to_contain_text("Noted: what do these say?")
    wait_idle(page)
    chips = page.locator(".stable-list .msg-user").get_by_role("list", name="Attached documents")
    expect(chips.locator(".file-chip")).to_have_count(2)
    expect(chips).to_contain_text("notes.md")
    expect(chips).to_contain_text("figures.pdf")
    chips.get_by_role("button", name=re.compile("figures.pdf")).click()
    expect(page.locator(".document-text")).to_contain_text("Quarterly figures: 42 apples")
    blocks = store_eval(page, "s.snapshot.entries.filter((e) => e.message?.role === 'user').pop().message.content.map((b) => b.text?.slice(0, 60))")
    assert blocks[0] == "what do these say?" and blocks[1].startswith('<document name="notes.md" type="text/markdown"'), blocks
    assert blocks[2].startswith('<document name="figures.pdf" type="application/pdf"'), blocks
    expect(tree_row(page, "what do these say?").first).to_contain_text("[notes.md] [figures.pdf]")
    everyday_shot(page, artifacts, "documents")
    # A file over the limit says so and keeps the rest.
    (tmp_path / "big.txt").write_bytes(b"a" * (10 * 1024 * 1024 + 10))
    page.fill("#composer-input", "and this one")
    page.get_by_label("Files to attach").set_input_files(str(tmp_path / "big.txt"))
    expect(page.locator(".composer .form-error")).to_contain_text("big.txt is 10.0 MB: documents up to 10.0 MB can be attached.")
    expect(page.locator("#composer-input")).to_have_value("and this one")
    ctx.close()
    assert page.console.errors == []


def test_export_and_a_read_only_share_link(browser, server, everyday, artifacts):
    ctx, page = open_page(browser, server)
    said(page, "do this in several steps", "The workspace holds")
    page.get_by_role("button", name="Share or download").click()
    share = page.get_by_role("dialog", name="Share and download")
    expect(share).to_be_visible()
    with page.expect_download() as markdown:
        share.get_by_role("button", name="Markdown").click()
    text = open(markdown.value.path(), encoding="utf-8").read()
    assert "## You" in text and "do this in several steps" in text and "The workspace holds **notes.md**" in text, text
    assert "<details><summary>Tool: bash (error)</summary>" in text
    with page.expect_download() as page_file:
        share.get_by_role("button", name="HTML page").click()
    html_text = open(page_file.value.path(), encoding="utf-8").read()
    assert "<style>" in html_text and "<strong>notes.md</strong>" in html_text and "<script" not in html_text
    with page.expect_download() as jsonl:
        share.get_by_role("link", name="Pi session (JSONL)").click()
    first = json.loads(open(jsonl.value.path(), encoding="utf-8").readline())
    assert first["type"] == "session" and first["version"] == 3
    share.get_by_role("button", name="Make a link and copy it").click()
    link = share.get_by_role("list", name="Share links").get_by_role("link").first
    url = link.get_attribute("href")
    assert url.startswith("/share/")
    everyday_shot(page, artifacts, "share")
    # Opened without signing in: the shared path, read-only.
    guest = browser.new_context(viewport=DESKTOP)
    visitor = guest.new_page()
    visitor.goto(server.base_url + url)
    expect(visitor.locator(".stable-list .msg-user")).to_contain_text("do this in several steps")
    expect(visitor.locator(".stable-list .msg-assistant")).to_contain_text("The workspace holds")
    expect(visitor.locator("#composer-input")).to_have_count(0)
    expect(visitor.get_by_role("button", name="Regenerate")).to_be_hidden()
    everyday_shot(visitor, artifacts, "shared-page")
    # Later messages are not shared; revoking ends the link.
    share.get_by_role("button", name="Close").click()
    said(page, "a later message", "Noted: a later message")
    visitor.reload()
    expect(visitor.locator(".stable-list")).not_to_contain_text("a later message")
    page.get_by_role("button", name="Share or download").click()
    share.get_by_role("button", name="Revoke").first.click()
    expect(share.get_by_role("list", name="Share links")).to_have_count(0)
    assert visitor.goto(server.base_url + url).status == 404
    guest.close()
    # Staff see the links in the console.
    staff_ctx = browser.new_context(viewport=DESKTOP)
    staff = staff_ctx.new_page()
    staff_login(staff, server)
    staff.goto(server.base_url + "/admin/runtime/sessionshare/")
    expect(staff.locator("#result_list")).to_contain_text("revoked")
    staff_ctx.close()
    ctx.close()


def test_search_every_session_pins_and_date_groups(browser, server, everyday, artifacts):
    ctx, page = open_page(browser, server, agent="everyday-other")
    said(page, "the persimmon orchard question", "Noted: the persimmon orchard question")
    other = page.url
    ctx.close()
    ctx, page = open_page(browser, server)
    said(page, "a session to pin", "Noted: a session to pin")
    nav = page.get_by_role("navigation", name="Sessions")
    expect(nav.locator(".session-group h3").first).to_have_text("Today")
    page.get_by_role("button", name="Pin the session").click()
    expect(page.get_by_role("button", name="Unpin the session")).to_be_visible()
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(nav.locator(".session-group h3").first).to_have_text("Pinned")
    expect(nav.locator(".session-group").first.locator("xpath=following-sibling::li[1]")).to_contain_text("A session to pin")
    nav.get_by_label("Search sessions").fill("persimmon")
    hits = nav.get_by_role("list", name="Matching sessions")
    expect(hits.get_by_role("listitem")).to_have_count(1)
    expect(hits).to_contain_text("everyday-other")  # another agent's session, named as such
    expect(hits.get_by_role("link")).to_have_attribute("href", other.replace(server.base_url, ""))
    everyday_shot(page, artifacts, "search-pins")
    ctx.close()


def test_continue_an_answer_cut_at_the_output_limit(browser, server, everyday, artifacts):
    ctx, page = open_page(browser, server)
    send(page, "a long answer please")
    bar = page.locator(".stable-list .msg-cut")
    expect(bar).to_contain_text("Cut short")
    wait_idle(page)
    bar.get_by_role("button", name="Continue").click()
    expect(answers(page)).to_have_count(1)
    expect(answers(page).first).to_contain_text("The first part of a long answer and here is the rest of it.", timeout=30_000)
    wait_idle(page)
    expect(page.locator(".stable-list .msg-user")).to_have_count(1)  # the request to go on is not a message of yours
    ctx.close()
    assert page.console.errors == []


def test_feedback_is_kept_in_the_tree_and_shown_in_the_console(browser, server, everyday, artifacts):
    ctx, page = open_page(browser, server)
    said(page, "rate this answer", "Noted: rate this answer")
    answers(page).last.get_by_role("button", name="Bad answer").click()
    note = page.get_by_placeholder("What went wrong? (optional)")
    note.fill("too terse")
    note.press("Enter")
    expect(answers(page).last.get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")
    entry = store_eval(page, "s.snapshot.entries.find((e) => e.type === 'custom' && e.customType === 'neta.feedback')")
    assert entry["data"]["rating"] == "down" and entry["data"]["note"] == "too terse", entry
    context = api(page, "GET", f"sessions/{store_eval(page, 's.sessionId')}/snapshot/")["body"]
    assert context["leafId"]  # the feedback entry never reaches the model: Pi's custom entries are not context
    run = api(page, "GET", f"runs/?session={store_eval(page, 's.sessionId')}&limit=1")["body"]["results"][0]["runId"]
    staff_ctx = browser.new_context(viewport=DESKTOP)
    staff = staff_ctx.new_page()
    staff_login(staff, server)
    staff.goto(server.base_url + f"/admin/runtime/agentrun/?q={run}")
    staff.locator("#result_list a", has_text=run[:8]).first.click()
    expect(staff.locator(".field-feedback")).to_contain_text("too terse")
    staff_ctx.close()
    ctx.close()


def test_custom_instructions_reach_the_system_prompt(browser, server, everyday, artifacts):
    ctx, page = open_page(browser, server)
    page.get_by_role("button", name="Settings").click()
    settings = page.get_by_role("dialog", name="Settings")
    settings.get_by_label("Custom instructions").fill("Always answer like a pirate.")
    settings.get_by_role("button", name="Save").click()
    expect(settings).to_contain_text("Saved")
    everyday_shot(page, artifacts, "settings")
    settings.get_by_role("button", name="Close").click()
    said(page, "hello sailor", "Arr, noted: hello sailor")
    page.get_by_role("button", name="Settings").click()
    settings.get_by_label("Custom instructions").fill("")
    settings.get_by_role("button", name="Save").click()
    expect(settings).to_contain_text("Saved")
    ctx.close()
