"""The chat page's defects and everyday controls, in a real browser.

Few page sessions, each walking many steps (a page costs seconds; a step costs
milliseconds). The sessions they read are written straight into the store by the
server's own provider (a rich answer, a long conversation with a side branch), so
each scene is exact; the ones that stream use a scripted model of their own.
Screenshots of the main states go to test-artifacts/browser/ (docs/screenshots/
holds copies, see docs/chat.md).
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import CONTRAST, PASSWORD, Console, answered, login, reached, send, store_eval, wait_idle

pytestmark = pytest.mark.slow

FAST_TEXT = "\n\n".join(
    f"Paragraph {i}: the answer streams quickly, about eight hundred characters a second, and the page follows it down."
    for i in range(1, 31)
)
RULES = {
    "version": 1,
    "chunk_size": 0,
    "rules": [
        {"match": {"system": "(?i)summar"}, "reply": [{"text": "Summary: a short talk about trees."}]},
        {"match": {"contains": "explode"}, "reply": {"error": "the model fell over"}},
        {
            "match": {"contains": "look around"},
            "replies": [
                [
                    {"text": "Let me look at the workspace first.", "chunk_size": 6, "delay_ms": 10},
                    {"tool_call": {"name": "ls", "arguments": {"path": "."}}, "chunk_size": 4, "delay_ms": 10},
                ],
                [{"text": FAST_TEXT[:1500], "chunk_size": 8, "delay_ms": 10}],
            ],
        },
        {"match": {"contains": "fast"}, "reply": [{"text": FAST_TEXT, "chunk_size": 8, "delay_ms": 10}]},
        {
            "match": {"contains": "ponder"},
            "reply": [
                {"thinking": "Let me think about this for a moment before answering.", "chunk_size": 4, "delay_ms": 30},
                {"text": "Thought it through.", "chunk_size": 4, "delay_ms": 10},
            ],
        },
    ],
    "default": {"reply": [{"text": "Noted: {{user}}", "chunk_size": 3, "delay_ms": 5}]},
}

SETUP = """
import json
from runtime.models import Agent, ModelConfig
rules = json.loads({rules!r})
model, _ = ModelConfig.objects.update_or_create(
    name="polish-scripted",
    defaults=dict(display_name="Polish scripted", provider_kind="scripted", provider_name="scripted", model_id="polish-scripted",
                  context_window=64000, max_output_tokens=4096, supports_thinking=True, supports_images=False,
                  price_input=1, price_output=2, options={{"rules": rules}}),
)
Agent.objects.update_or_create(name="zz-polish", defaults=dict(
    model=model, restore_last_session=False, summarize_on_switch="never", thinking_level="medium",
    compaction_keep_recent_tokens=8, description="Answers questions about trees, quickly."))
"""

RICH = r"""# A heading inside an answer

Inline math $e^{i\pi} + 1 = 0$ and \(a\,b\) keep their backslashes; dollars like $5 and $10 stay text.

$$\int_0^1 x\,dx = \frac{1}{2}$$

\[\sum_{k=1}^{n} k = \frac{n(n+1)}{2}\]

Unsafe: $\href{javascript:alert(1)}{click}$ and $<img src=x onerror=alert(1)>$

| quantity | value | unit |
|---|---|---|
| Avogadro constant | 602214076000000000000000 | per mole |
| speed of light in vacuum | 299792458 | metres per second |

- [x] done item
- [ ] open item

```python
def answer():
    return 42
```
"""

BUILD = """
import json
from django.contrib.auth import get_user_model
from runtime.sessions.services import session_create
from sessions_tree.providers import get_provider
alice = get_user_model().objects.get(username="alice")
def make(title):
    meta = session_create(actor=alice, agent_name="zz-polish", title=title)
    return meta.session_id, get_provider(meta.provider)
def say(provider, sid, role, content, parent=None, **extra):
    blocks = content if isinstance(content, list) else [{{"type": "text", "text": content}}]
    message = {{"role": role, "content": blocks, "timestamp": 1700000000000, **extra}}
    if role == "assistant":
        message.update(api="x", provider="scripted", model="polish-scripted", stopReason="stop",
                       usage={{"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}})
    return (provider.append_message(sid, message, parent_id=parent) if parent else provider.append_message(sid, message))["id"]

rich, p = make("Rich answers")
say(p, rich, "user", "Show me **math**, a table and code")
call = say(p, rich, "assistant", [{{"type": "text", "text": "Reading it."}},
       {{"type": "toolCall", "id": "call-1", "name": "read", "arguments": {{"path": "notes.md"}}}}], stopReason="toolUse")
say(p, rich, "toolResult", "# notes\\nline two", toolCallId="call-1", toolName="read", isError=False)
say(p, rich, "assistant", {rich!r})

long, p = make("Long talk")
ids = []
for i in range(70):
    ids.append(say(p, long, "user", f"question {{i}}"))
    ids.append(say(p, long, "assistant", f"answer {{i}} with ~~old~~ words, see [the docs](http://example.com/{{i}})"))
p.switch_leaf(long, ids[3])
side = []
for i in range(5):
    side.append(say(p, long, "user", f"side question {{i}}"))
    side.append(say(p, long, "assistant", f"side answer {{i}}"))
p.switch_leaf(long, ids[-1])
print(json.dumps({{"rich": rich, "long": long, "ids": ids, "side": side}}))
"""


@pytest.fixture(scope="module")
def polish(server):
    # One Django start-up for both (each costs seconds).
    made = json.loads(server.python(SETUP.format(rules=json.dumps(RULES)) + BUILD.format(rich=RICH)).strip().splitlines()[-1])
    return made


def shot(page, artifacts, name: str) -> None:
    page.screenshot(path=str(artifacts / f"chat-{name}.png"))


def open_page(browser, server, *, width=1440, height=900, mobile=False):
    context = browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=mobile, has_touch=mobile, device_scale_factor=1
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.console = Console(page)
    return context, page


def goto_session(page, server, session_id: str) -> None:
    page.goto(f"{server.base_url}/sessions/{session_id}/")
    page.wait_for_selector("html[data-conversation-ready]")


def tokens_of(text: str) -> float:
    figure = re.search(r"([\d.]+)(k?)\s*/", text)
    return float(figure.group(1)) * (1000 if figure.group(2) else 1)


DISTANCE = "() => { const el = document.querySelector('.conversation'); return el.scrollHeight - el.scrollTop - el.clientHeight; }"


def test_a_first_visit_signs_in_follows_streams_and_keeps_the_composer_honest(browser, server, polish, artifacts):
    """Defects 1, 2, 7, 9, 10, 11; the first screen, shortcuts, theme and thinking time."""
    context, page = open_page(browser, server)
    # 1. /login/ without ?next= lands on the chat page, not on /accounts/profile/.
    page.goto(server.base_url + "/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page).to_have_url(re.compile(r"/sessions/[0-9a-f-]{36}/$"))
    page.goto(server.base_url + "/?agent=zz-polish")
    page.wait_for_selector("html[data-conversation-ready]")
    # 9. The first screen shows although the session holds model/thinking notes; the composer has the focus.
    first = page.get_by_role("region", name="zz-polish")
    expect(first).to_be_visible()
    expect(first).to_contain_text("Answers questions about trees, quickly.")
    expect(first.get_by_role("list", name="Starter prompts").get_by_role("button")).to_have_count(4)
    expect(page.locator("#composer-input")).to_be_focused()
    shot(page, artifacts, "first-screen-1440")
    # `?` (outside a text field) opens the shortcuts; Escape closes them.
    page.locator(".conversation").click(position={"x": 8, "y": 8})  # beside the first screen's buttons
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("fork into a new session")
    shot(page, artifacts, "shortcuts-1440")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # Theme: system → light → dark, remembered for this user across a reload.
    toggle = page.locator(".theme-toggle")
    expect(toggle).to_have_attribute("data-theme-choice", "system")
    toggle.click()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    toggle.click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert page.evaluate("() => localStorage.getItem('neta.theme.alice')") == "dark"
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(21, 23, 27)"
    # A starter prompt fills the composer.
    first.get_by_role("button", name=re.compile("Explain with an example")).click()
    expect(page.locator("#composer-input")).to_have_value(re.compile("git rebase"))
    page.fill("#composer-input", "")

    # Thinking says how long it took (measured while it streamed, kept over a reload).
    send(page, "ponder this")
    final = page.locator(".stable-list .msg-assistant").last
    answered(page, "ponder this", "Thought it through.")
    expect(final.locator(".thinking > summary")).to_contain_text(re.compile(r"Thought for \d+\.\d s"))
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    expect(page.locator(".stable-list .thinking > summary").last).to_contain_text("Thought for")
    shot(page, artifacts, "dark-1440")
    toggle.click()  # back to the system's theme
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile("."))

    # 2. A fast stream (~800 characters/s) is followed to its end.
    page.evaluate("""() => { window.__far = 0; const el = document.querySelector('.conversation');
      const tick = () => { const live = document.querySelector('.msg-streaming');
        // while it streams (not the frame where the stored answer replaces it)
        if (live && !document.querySelector(`.stable-list [data-entry-id="${live.dataset.entryId}"]`)) window.__far = Math.max(window.__far, el.scrollHeight - el.scrollTop - el.clientHeight);
        window.__tick = requestAnimationFrame(tick); }; tick(); }""")
    send(page, "answer fast please")
    expect(page.locator(".msg-streaming")).to_be_visible()
    answered(page, "answer fast please", "Paragraph 30")
    page.wait_for_function(f"() => ({DISTANCE})() <= 24")
    far = page.evaluate("() => window.__far")
    assert far < 300, f"fell {far}px behind the stream"
    expect(page.locator(".jump-latest")).to_have_count(0)
    # And through a tool run (the streamed card, then the stored entries, then the next answer).
    send(page, "look around please")
    answered(page, "look around please", "Paragraph 10")  # not the last answer, which says it too
    page.wait_for_function(f"() => ({DISTANCE})() <= 24")
    assert page.evaluate("() => window.__far") < 300
    # Scrolling up while it streams stops the following; "Jump to latest" brings it back.
    send(page, "again fast")
    reached(page, "again fast", "Paragraph 3")
    page.mouse.move(700, 400)
    page.mouse.wheel(0, -600)
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_visible()
    # The answer goes on below (streaming, or already stored: a loaded machine delivers the
    # rest in one burst, between two looks), and the page stays where the reader put it.
    reached(page, "again fast", "Paragraph 12")  # this answer's, not the last one's
    assert page.evaluate(DISTANCE) > 300  # left where the reader put it
    shot(page, artifacts, "jump-to-latest-1440")
    jump.click()
    page.wait_for_function(f"() => ({DISTANCE})() <= 24")
    expect(jump).to_have_count(0)
    answered(page, "again fast", "Paragraph 30")
    page.wait_for_function(f"() => ({DISTANCE})() <= 24")

    # 7 + 11. "Continue from here": the banner names a message, not a settings note; Escape drops the text.
    page.locator(".msg-user", has_text="ponder this").get_by_role("button", name="Continue from here").click()
    banner = page.locator(".branch-banner")
    expect(banner).to_contain_text("the start of the session")
    expect(banner).not_to_contain_text("thinking:")
    page.locator(".msg-user", has_text="answer fast please").get_by_role("button", name="Continue from here").click()
    expect(banner).to_contain_text("“Thought it through.”")
    expect(page.locator("#composer-input")).to_have_value("answer fast please")
    page.press("#composer-input", "Escape")
    expect(banner).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")
    # Moving elsewhere in the tree drops it too.
    page.locator(".msg-user", has_text="again fast").get_by_role("button", name="Continue from here").click()
    expect(page.locator("#composer-input")).to_have_value("again fast")
    page.locator(".tree-row", has_text="Thought it through.").click()
    page.get_by_role("button", name="Go here").click()
    expect(page.locator(".tree-row.is-leaf")).to_contain_text("Thought it through.")
    expect(banner).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")
    page.locator(".tree-row", has_text="Paragraph 1:").last.click()
    page.get_by_role("button", name="Go here").click()
    expect(page.locator(".tree-row.is-leaf")).to_contain_text("Paragraph 1:")

    # 10. Compaction from the page: the button, and /compact typed in the composer (not sent as a prompt).
    meter = page.locator(".context-usage")
    before = meter.inner_text()
    page.get_by_role("button", name="Compact").click()
    expect(page.locator(".stable-list .msg-compaction")).to_have_count(1)
    # The figure is what the next request holds (summary + kept entries), not the run's from before.
    expect(meter).to_contain_text("~")
    assert tokens_of(meter.inner_text()) < tokens_of(before) / 2, (before, meter.inner_text())
    send(page, "one more")
    answered(page, "one more", "Noted: one more")
    send(page, "/compact keep the numbers")
    expect(page.locator(".stable-list .msg-compaction")).to_have_count(2)
    expect(page.locator(".stable-list .msg-user", has_text="/compact")).to_have_count(0)
    shot(page, artifacts, "compacted-1440")
    # An old failure does not survive a reload as "Run: failed" (it stays with its message).
    send(page, "explode now")
    expect(page.locator(".run-state")).to_have_attribute("data-state", "failed")
    expect(page.locator(".stable-list div.msg-error")).to_contain_text("the model fell over")
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    page.wait_for_function("() => window.neta.store.connection.state === 'live'")
    page.wait_for_load_state("networkidle")  # the page's look at the last run has answered
    expect(page.locator(".run-state")).not_to_have_attribute("data-state", "failed")
    expect(page.locator(".stable-list div.msg-error")).to_contain_text("the model fell over")
    context.close()
    assert page.console.errors == [], page.console.errors


def test_rich_answers_long_talks_and_the_tree(browser, server, polish, artifacts):
    """Defects 4, 6, 7, 8, 12; code blocks, math, tree connectors, folds and scroll-to-node."""
    context, page = open_page(browser, server)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(page, server.base_url, path=f"/sessions/{polish['rich']}/")
    answer = page.locator(".stable-list .msg-assistant").last
    # 4. Math: inline and display, typeset by KaTeX, backslashes kept, nothing unsafe gets through.
    expect(answer.locator(".math-inline[data-typeset] .katex")).to_have_count(4)
    expect(answer.locator(".math-display[data-typeset] .katex-display")).to_have_count(2)
    tex = answer.locator(".math[data-typeset]").evaluate_all("(nodes) => nodes.map((n) => n.dataset.tex)")
    assert "a\\,b" in tex and "\\int_0^1 x\\,dx = \\frac{1}{2}" in tex
    expect(answer.locator(".markdown")).to_contain_text("dollars like $5 and $10 stay text")
    assert answer.locator("a[href^='javascript']").count() == 0
    assert answer.locator("img").count() == 0
    page.wait_for_function("() => document.fonts.check('16px KaTeX_Main')")  # KaTeX's font loads (it may still be on its way)
    # Code: a language label and a copy button.
    block = answer.locator(".code-block")
    expect(block.locator(".code-lang")).to_have_text("python")
    block.get_by_role("button", name="Copy the python code").click()
    expect(block.locator(".code-copy")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == "def answer():\n    return 42\n"
    # 12. Task-list checkboxes kept (and inert); headings below the page's own; no box in a box; AA contrast.
    boxes = answer.locator("li input[type=checkbox]")
    expect(boxes).to_have_count(2)
    assert boxes.evaluate_all("(b) => b.map((x) => [x.checked, x.disabled])") == [[True, True], [False, True]]
    h1 = float(answer.locator(".markdown h1").evaluate("(h) => parseFloat(getComputedStyle(h).fontSize)"))
    assert h1 <= 18, h1
    answer.locator("details.steps > summary").click()  # one answer, one card: its tool call is a step
    card = page.locator(".stable-list .tool-card[data-tool=read]")
    card.locator("summary").click()
    assert card.locator(".tool-output").evaluate("(p) => getComputedStyle(p).borderTopWidth") == "0px"
    for button in page.locator(".stable-list .msg-actions button").all():
        ratio = button.evaluate(CONTRAST)
        assert ratio >= 4.5, (button.inner_text(), ratio)
    shot(page, artifacts, "rich-answer-1440")

    # 8. Sessions: the list shows no empty sessions; "New session" twice is one session; a fork is named after its parent.
    sessions = page.get_by_role("navigation", name="Sessions")
    expect(sessions).to_contain_text("Rich answers")
    with page.expect_navigation():
        page.get_by_role("button", name="+ New session").click()
    page.wait_for_selector("html[data-conversation-ready]")
    fresh = page.url
    assert polish["rich"] not in fresh
    with page.expect_navigation():
        page.get_by_role("button", name="+ New session").click()
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.url == fresh  # the untouched session again, not one more empty one
    send(page, "hello there")
    expect(page.locator(".stable-list .msg-assistant")).to_contain_text("Noted: hello there")
    wait_idle(page)
    # Named after its first message: provisionally by the page, then by the auto-title
    # (the scripted model's: the first words, capitalized); its entry count is current.
    expect(page.get_by_role("heading", level=1)).to_have_text("Hello there")
    count = store_eval(page, "s.snapshot.entries.length")
    expect(sessions.locator("a.current .session-meta")).to_contain_text(f"{count} entries")
    expect(sessions.locator("a.current .session-name")).to_have_text("Hello there")

    goto_session(page, server, polish["long"])
    # 7. Tree rows read as text, not markdown.
    tree = page.get_by_role("tree", name="Entries of this session")
    expect(tree.locator(".tree-row", has_text="answer 69 with old words, see the docs")).to_have_count(1)
    expect(tree).not_to_contain_text("~~")
    expect(tree).not_to_contain_text("](http")
    # Tree readability: siblings start with connectors (├─ └─), a chain continues without; the side branch is folded.
    tree.press("Home")
    main_branch = tree.locator(".tree-row.starts-sibling", has_text="question 2")
    expect(main_branch.locator(".guide-mid")).to_have_count(1)
    expect(tree.locator(".tree-row", has_text="question 3").first.locator(".guide-line")).to_have_count(1)  # the chain goes on, no connector
    main_depth = main_branch.get_attribute("aria-level")
    assert tree.locator(".tree-row", has_text="question 0").first.get_attribute("aria-level") == "1"
    tree.press("End")
    side_branch = tree.locator(".tree-row.starts-sibling", has_text="side question 0")
    expect(side_branch.locator(".guide-last")).to_have_count(1)
    assert side_branch.get_attribute("aria-level") == main_depth == "2"  # both branches of the branch point indent once
    fold = tree.locator(".tree-row.kind-fold")
    expect(fold).to_have_count(1)
    expect(fold).to_contain_text("⋯ 8 more entries")
    expect(tree.locator(".tree-row", has_text="side answer 4")).to_have_count(1)  # the branch's tip stays
    expect(tree.locator(".tree-row", has_text="side answer 2")).to_have_count(0)
    shot(page, artifacts, "tree-folded-1440")
    fold.click()
    expect(tree.locator(".tree-row", has_text="side answer 2")).to_have_count(1)
    expect(fold).to_have_count(0)
    # Selecting a node scrolls the conversation to it (even beyond the drawn items).
    tree.press("Home")
    tree.locator(".tree-row", has_text="question 1").first.click()
    target = page.locator(f".stable-list [data-entry-id='{polish['ids'][2]}']")
    expect(target).to_have_class(re.compile("revealed"))
    assert target.evaluate(
        "(n) => { const r = n.getBoundingClientRect(), c = n.closest('.conversation').getBoundingClientRect(); return r.top >= c.top && r.bottom <= c.bottom; }"
    )
    shot(page, artifacts, "tree-scroll-to-node-1440")
    # 6. "Show earlier" keeps the reader's place.
    goto_session(page, server, polish["long"])
    scroller = page.locator(".conversation")
    scroller.evaluate("(el) => { el.scrollTop = 0; }")
    earlier = page.get_by_role("button", name=re.compile("earlier of"))
    anchor = page.locator(".stable-list .msg").first
    anchor_id = anchor.get_attribute("data-entry-id")
    top_before = anchor.evaluate("(n) => n.getBoundingClientRect().top")
    earlier.click()
    page.wait_for_function("(n) => document.querySelectorAll('.stable-list .msg').length > n", arg=60)
    top_after = page.locator(f".stable-list [data-entry-id='{anchor_id}']").evaluate("(n) => n.getBoundingClientRect().top")
    assert abs(top_after - top_before) <= 2, (top_before, top_after)

    # 8. A fork is named after its parent.
    tree = page.get_by_role("tree", name="Entries of this session")
    tree.focus()
    tree.press("f")
    page.wait_for_url(lambda url: polish["long"] not in url)
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.get_by_role("heading", level=1)).to_have_text("Long talk (fork)")
    context.close()
    assert page.console.errors == [], page.console.errors


def test_a_phone_never_scrolls_sideways_and_drawers_close_outside(browser, server, polish, artifacts):
    """Defects 3 and 5 at 390 px."""
    context, page = open_page(browser, server, width=390, height=844, mobile=True)
    login(page, server.base_url, path=f"/sessions/{polish['rich']}/")
    # 5. The table scrolls inside its own box; numbers and words are not broken.
    table = page.locator(".stable-list .markdown table")
    assert table.evaluate("(t) => t.scrollWidth > t.clientWidth")
    lines = page.locator(".stable-list .markdown td", has_text="602214076000000000000000").evaluate(
        "(td) => { const r = document.createRange(); r.selectNodeContents(td); return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size; }"
    )
    assert lines == 1
    # 3. A long error in the status line does not widen the page; the top bar stays.
    page.evaluate("() => window.neta.store.setRun({ runId: 'r', state: 'failed', error: 'x'.repeat(400) + ' a very long error' })")
    expect(page.locator(".run-state")).to_have_attribute("data-state", "failed")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.evaluate("() => window.scrollTo(300, 600)")
    assert page.evaluate("() => [window.scrollX, window.scrollY]") == [0, 0]
    assert page.locator(".topbar").evaluate("(t) => t.getBoundingClientRect().top") == 0
    shot(page, artifacts, "rich-answer-390")
    # Drawers: a backdrop, and a tap outside closes them.
    page.get_by_role("button", name="Session tree").click()
    expect(page.locator(".tree-sidebar")).to_be_visible()
    expect(page.locator(".drawer-backdrop")).to_be_visible()
    shot(page, artifacts, "tree-drawer-390")
    page.mouse.click(10, 400)  # left of the drawer
    expect(page.locator(".tree-sidebar")).to_have_count(0)
    expect(page.locator(".drawer-backdrop")).to_have_count(0)
    page.get_by_role("button", name="Sessions").click()
    expect(page.get_by_role("navigation", name="Sessions")).to_be_visible()
    page.mouse.click(380, 400)  # right of the drawer
    expect(page.get_by_role("navigation", name="Sessions")).to_have_count(0)
    page.goto(server.base_url + "/?agent=zz-polish")
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.locator(".first-screen")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    shot(page, artifacts, "first-screen-390")
    context.close()
    assert page.console.errors == [], page.console.errors
