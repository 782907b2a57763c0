"""The chat page's edge cases, in Chromium against a real Daphne: a late ack that must not eat
what was typed since, a fresh session that is a "New session", switching agents without a
trail of empty sessions, archived sessions seen and restored, /name /tree /fork, a long
paste, a steer during a run, dark-theme contrast of the message buttons, and a phone
(Enter is a new line on touch screens, "Jump to latest" clear of the status bar).

Two page sessions (desktop, phone) walk the steps. ``NETA_WRITE_DOC_SCREENSHOTS=1`` also
writes the shots docs/chat.md shows (docs/screenshots/chat-*.png).
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support import browser as support
from tests.support.browser import Console, answered, api, login, send, store_eval
from tests.support.browser import CONTRAST

pytestmark = pytest.mark.slow


FAST_TEXT = "\n\n".join(f"Paragraph {i}: a quick answer that runs well past the bottom of a phone's screen." for i in range(1, 41))
RULES = {
    "version": 1,
    "chunk_size": 0,
    "rules": [
        {"match": {"system": "(?i)summar"}, "reply": [{"text": "Summary: a short talk."}]},
        {
            "match": {"contains": "inspect"},
            "replies": [
                [
                    {"text": "Looking first.", "chunk_size": 4, "delay_ms": 10},
                    {"tool_call": {"name": "ls", "arguments": {"path": "."}}, "chunk_size": 4, "delay_ms": 10},
                    {"pause_ms": 4000},  # long enough to steer while the tool card is up
                ],
                [{"text": "Inspected.", "chunk_size": 4, "delay_ms": 10}],
            ],
        },
        {"match": {"contains": "def f0(x)"}, "reply": [{"text": "Got the code.", "chunk_size": 4, "delay_ms": 5}]},
        {"match": {"contains": "fast"}, "reply": [{"text": FAST_TEXT, "chunk_size": 6, "delay_ms": 15}]},
    ],
    "default": {"reply": [{"text": "Noted: {{user}}", "chunk_size": 3, "delay_ms": 5}]},
}

SETUP = """
import json
from runtime.models import Agent, ModelConfig
rules = json.loads({rules!r})
model, _ = ModelConfig.objects.update_or_create(
    name="gaps-scripted",
    defaults=dict(display_name="Gaps scripted", provider_kind="scripted", provider_name="scripted", model_id="gaps-scripted",
                  context_window=64000, max_output_tokens=4096, supports_thinking=False, supports_images=True,
                  price_input=1, price_output=2, options={{"rules": rules}}),
)
Agent.objects.update_or_create(name="gaps", defaults=dict(model=model, workspace_mode="shared", restore_last_session=False,
    summarize_on_switch="never", description="Closes the last gaps."))
Agent.objects.update_or_create(name="gaps-restore", defaults=dict(model=model, workspace_mode="shared", restore_last_session=True,
    summarize_on_switch="never", description="Comes back to its last session."))
"""

# The late ack: the page's socket goes through Playwright, which holds the server's acks
# while `held` is on (the run itself goes on; only the answer to "prompt" is late).
class AckGate:
    def __init__(self, page):
        self.holding = False
        self.held: list[str] = []
        self.page_side = None
        page.route_web_socket(re.compile(r"/ws/sessions/"), self._route)

    def _route(self, ws):
        server = ws.connect_to_server()
        self.page_side = ws

        def from_server(message):
            if self.holding and isinstance(message, str) and json.loads(message).get("type") == "ack":
                self.held.append(message)
            else:
                ws.send(message)

        server.on_message(from_server)

    def release(self):
        self.holding = False
        for message in self.held:
            self.page_side.send(message)
        self.held = []


PASTE_IMAGE = """() => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M/AAAADAQGjoNP0AAAAAElFTkSuQmCC';
  const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], 'pasted.png', {type: 'image/png'}));
  document.querySelector('#composer-input').dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
}"""


@pytest.fixture(scope="module")
def gaps_agent(server):
    server.python(SETUP.format(rules=json.dumps(RULES)))
    return "gaps"


def shot(page, artifacts, name: str) -> None:
    support.shot(page, artifacts, f"gaps-{name}", f"chat-{name}")


def sessions_of(page, agent: str, status: str = "active") -> list[dict]:
    return api(page, "GET", f"sessions/?agent={agent}&status={status}&limit=200")["body"]["results"]


def test_late_ack_fresh_session_agents_archive_slash_paste_steer_and_contrast(browser, server, gaps_agent, artifacts):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    gate = AckGate(page)

    # 3. `/?agent=X` is a fresh empty state for that agent, not an "Untitled session".
    login(page, server.base_url, path=f"/?agent={gaps_agent}")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text("New session")
    expect(page).to_have_title("New session · Neta")
    expect(page.get_by_role("region", name=gaps_agent)).to_contain_text("Closes the last gaps.")
    nav = page.get_by_role("navigation", name="Sessions")
    expect(nav.locator("a.current .session-name")).to_have_text("New session")
    expect(page.get_by_text("Untitled session")).to_have_count(0)

    # 1. A late ack: the composer empties when the message leaves; what is typed before the
    # server's ack arrives is the next message and stays.
    gate.holding = True
    send(page, "first of two")
    expect(page.locator("#composer-input")).to_have_value("")
    page.locator("#composer-input").press_sequentially("the next question")
    page.wait_for_function("() => window.neta.store.snapshot.entries.some((e) => e.message?.role === 'assistant')")
    assert gate.held, "the ack was not held"
    gate.release()
    answered(page, "first of two", "Noted: first of two")
    expect(page.locator("#composer-input")).to_have_value("the next question")
    expect(heading).to_have_text(re.compile("^first of two$", re.IGNORECASE))  # its first message, then its title
    page.fill("#composer-input", "")
    sid = store_eval(page, "s.sessionId")

    # 5. Slash commands: /name renames, /tree opens and focuses the tree, /fork copies the path.
    send(page, "/name Orchard plans")
    expect(heading).to_have_text("Orchard plans")
    expect(page.locator("#composer-input")).to_have_value("")
    assert api(page, "GET", f"sessions/{sid}/")["body"]["title"] == "Orchard plans"
    page.get_by_role("button", name="Session tree").click()  # closed …
    expect(page.locator(".tree-sidebar")).to_have_count(0)
    send(page, "/tree")  # … and opened by the command, with the focus in it
    expect(page.locator(".tree-sidebar")).to_be_visible()
    expect(page.get_by_role("tree")).to_be_focused()
    send(page, "/fork")
    page.wait_for_url(re.compile(r"/sessions/(?!%s)[0-9a-f-]{36}/$" % sid))
    page.wait_for_selector("html[data-conversation-ready]")
    expect(heading).to_have_text("Orchard plans (fork)")
    expect(page.locator(".stable-list .msg-assistant")).to_contain_text("Noted: first of two")
    fork = store_eval(page, "s.sessionId")
    assert api(page, "GET", f"sessions/{fork}/")["body"]["parentSessionId"] == sid

    # 6. A long paste (code: tabs, blank lines, trailing spaces) arrives whole and is sent whole.
    code = "\n".join(f"def f{i}(x):\n\treturn x * {i}  \n" for i in range(300))
    page.evaluate("(t) => navigator.clipboard.writeText(t)", code)
    page.locator("#composer-input").focus()
    page.keyboard.press("Control+V")
    assert page.input_value("#composer-input") == code
    page.press("#composer-input", "Enter")
    answered(page, code, "Got the code.")
    stored = store_eval(page, "s.snapshot.entries.filter((e) => e.message?.role === 'user').map((e) => e.message.content[0].text)")
    assert stored[-1] == code
    expect(page.locator(".stable-list .msg-user").last).to_contain_text("def f299(x):")
    # A pasted image is attached (not pasted as text) and goes with the next prompt.
    page.locator("#composer-input").focus()
    page.evaluate(PASTE_IMAGE)
    attached = page.get_by_role("list", name="Attached images")
    expect(attached.locator("img")).to_have_count(1)
    assert page.input_value("#composer-input") == ""
    send(page, "what is in the pasted picture")
    answered(page, "what is in the pasted picture", "Noted: what is in the pasted picture")
    expect(page.locator(".stable-list .msg-user").last.locator("img.msg-image")).to_have_count(1)
    expect(attached).to_have_count(0)

    # 6. Steer: a message sent while a run is active, as a steer, joins that run.
    send(page, "inspect the workspace")
    expect(page.locator(".tool-card")).not_to_have_count(0)
    page.wait_for_function("() => window.neta.store.running")
    page.get_by_label("Deliver as").select_option("steer")
    send(page, "also count the files")
    queued = page.get_by_role("list", name="Queued messages")
    expect(queued).to_contain_text("also count the files")
    expect(queued).to_contain_text("Steer")
    answered(page, "also count the files", "Noted: also count the files")
    expect(queued).to_have_count(0)
    runs = api(page, "GET", f"runs/?session={fork}&limit=5")["body"]["results"]
    assert [r["prompt"] for r in runs[:1]] == ["inspect the workspace"]  # the steer made no run of its own
    path_texts = store_eval(
        page,
        "s.snapshot.activePath.map((id) => s.entry(id)).filter((e) => e.type === 'message').map((e) => e.message.role + ':' + (e.message.content.find?.((b) => b.type === 'text')?.text ?? ''))",
    )
    tail = path_texts[path_texts.index("user:inspect the workspace"):]
    assert tail[0] == "user:inspect the workspace" and "user:also count the files" in tail, tail
    assert tail.index("user:also count the files") > 1  # after the run's first answer (the tool call)

    # 7. Dark theme: every message button reads at ≥ 4.5:1 (WCAG AA) on its message.
    toggle = page.locator(".theme-toggle")
    while page.locator("html").get_attribute("data-theme") != "dark":
        toggle.click()
    page.mouse.move(1, 1)  # no hover: buttons at rest
    buttons = page.locator(".stable-list .msg .msg-actions button:not(:disabled)")
    assert buttons.count() >= 4
    ratios = {f"{i}:{b.inner_text() or b.get_attribute('aria-label')}": b.evaluate(CONTRAST) for i, b in enumerate(buttons.all())}
    low = {k: round(v, 2) for k, v in ratios.items() if v < 4.5}
    assert not low, low
    shot(page, artifacts, "dark-buttons")
    while page.locator("html").get_attribute("data-theme") is not None:
        toggle.click()

    # 2. Switching agents: to an agent that restores sessions (its last one, the same every
    # time) and back to one that does not (a draft): nothing empty is left behind.
    before = {a: len(sessions_of(page, a)) for a in (gaps_agent, "gaps-restore")}
    picker = page.get_by_label("Agent")
    picker.select_option("gaps-restore")
    page.wait_for_url(re.compile(r"agent=gaps-restore"))
    page.wait_for_selector("html[data-conversation-ready]")
    expect(heading).to_have_text("New session")
    landed = page.evaluate("() => window.neta.data.sessionId")
    page.get_by_label("Agent").select_option(gaps_agent)
    page.wait_for_url(re.compile(r"agent=gaps&new=1"))
    page.wait_for_selector("html[data-conversation-ready]")
    expect(heading).to_have_text("New session")
    assert page.evaluate("() => window.neta.data.sessionId") is None  # a draft: nothing stored
    page.get_by_label("Agent").select_option("gaps-restore")
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.evaluate("() => window.neta.data.sessionId") == landed  # the same one, not another
    page.get_by_label("Agent").select_option(gaps_agent)
    page.wait_for_url(re.compile(r"agent=gaps&new=1"))
    page.wait_for_selector("html[data-conversation-ready]")
    after = {a: len(sessions_of(page, a)) for a in (gaps_agent, "gaps-restore")}
    assert after[gaps_agent] == before[gaps_agent]
    assert after["gaps-restore"] <= before["gaps-restore"] + 1  # at most its one fresh session, reused

    # 4. Archived sessions: seen under the list, opened, restored (PATCH through the service).
    page.goto(f"{server.base_url}/sessions/{sid}/")
    page.wait_for_selector("html[data-conversation-ready]")
    row = nav.locator("li", has=page.locator(f'a[href="/sessions/{fork}/"]'))
    row.hover()
    row.get_by_role("button", name=re.compile("^Archive")).click()
    page.get_by_role("dialog", name="Archive this session?").get_by_role("button", name="Archive").click()
    expect(row).to_have_count(0)
    toggle_archived = nav.get_by_role("button", name="Archived")
    toggle_archived.click()
    expect(toggle_archived).to_have_attribute("aria-expanded", "true")
    archived = nav.get_by_role("list", name="Archived sessions")
    expect(archived.get_by_role("link", name=re.compile("Orchard plans \\(fork\\)"))).to_be_visible()
    shot(page, artifacts, "archived")
    archived.get_by_role("link", name=re.compile("Orchard plans \\(fork\\)")).click()
    page.wait_for_url(f"**/sessions/{fork}/")
    page.wait_for_selector("html[data-conversation-ready]")
    banner = page.locator(".archived-banner")
    expect(banner).to_contain_text("This session is archived")
    expect(page.locator(".stable-list .msg-assistant").first).to_contain_text("Noted: first of two")
    banner.get_by_role("button", name="Restore").click()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page.locator(".archived-banner")).to_have_count(0)
    assert api(page, "GET", f"sessions/{fork}/")["body"]["status"] == "active"
    expect(nav.locator(f'a[href="/sessions/{fork}/"]')).to_have_count(1)
    # And from the list: archive through the API, restore with the row's button.
    assert api(page, "PATCH", f"sessions/{sid}/", {"status": "archived"})["status"] == 200
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    nav.get_by_role("button", name="Archived").click()
    nav.get_by_role("list", name="Archived sessions").get_by_role("button", name="Restore Orchard plans").click()
    expect(nav.get_by_role("list", name="Recent sessions").locator(f'a[href="/sessions/{sid}/"]')).to_have_count(1)
    assert api(page, "GET", f"sessions/{sid}/")["body"]["status"] == "active"
    context.close()
    assert console.errors == [], console.errors


def test_a_phone_enter_is_a_new_line_and_jump_to_latest_clears_the_status_bar(browser, server, gaps_agent, artifacts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    page.add_init_script("localStorage.removeItem('neta.enterSends')")
    login(page, server.base_url, path=f"/?agent={gaps_agent}&new=1")

    # 7. On a touch screen Enter is a new line by default; Send sends.
    expect(page.get_by_label("Enter sends")).not_to_be_checked()
    composer = page.locator("#composer-input")
    composer.fill("line one")
    composer.press("Enter")
    composer.press_sequentially("line two")
    expect(composer).to_have_value("line one\nline two")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/sessions/[0-9a-f-]{36}/$"))  # the draft became a session
    page.wait_for_selector("html[data-conversation-ready]")
    answered(page, "line one\nline two", "Noted: line one")

    # 7. "Jump to latest" at 390 px sits in the conversation, clear of the status bar.
    composer.fill("answer fast please")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg-streaming")).to_contain_text("Paragraph 12")  # past the bottom of the phone's conversation
    page.locator(".conversation").evaluate("(el) => el.scrollBy(0, -400)")
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_visible()
    box = jump.bounding_box()
    status = page.locator(".status-bar").bounding_box()
    conversation = page.locator(".conversation").bounding_box()
    assert box["y"] + box["height"] <= status["y"], (box, status)
    assert box["y"] >= conversation["y"], (box, conversation)
    assert box["y"] + box["height"] <= conversation["y"] + conversation["height"], (box, conversation)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    shot(page, artifacts, "phone-jump-to-latest")
    jump.click()
    expect(jump).to_have_count(0)
    answered(page, "answer fast please", "Paragraph 40")
    context.close()
    assert console.errors == [], console.errors
