"""The chat page in a real browser against a real server (scripted model, inline backend)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import PASSWORD, SLOW_TEXT, answered, login, open_steps, send, server_snapshot, store_eval, wait_idle

pytestmark = pytest.mark.slow


def shot(page, artifacts, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"))


def test_login_then_the_agents_last_session_is_restored(browser, server, artifacts):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(server.base_url + "/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.fill("#id_username", "alice")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_contain_text("enter a correct username and password")
    shot(page, artifacts, "login-error")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("html[data-conversation-ready]")
    expect(page).to_have_url(re.compile(r"/sessions/[0-9a-f-]{36}/$"))  # a reload comes back here
    first = page.url
    page.goto(server.base_url + "/")  # the default agent restores the last session
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.url == first
    page.goto(server.base_url + "/?agent=browser")  # this one does not
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.url != first
    expect(page.get_by_role("navigation", name="Sessions")).to_be_visible()
    shot(page, artifacts, "login-restored")
    # Another user's session is a 404, not a page.
    other = browser.new_context()
    mallory = other.new_page()
    login(mallory, server.base_url, username="mallory", path="/")
    response = mallory.goto(first)
    assert response.status == 404
    other.close()
    context.close()


def test_a_prompt_streams_and_a_tool_card_appears(chat, artifacts):
    send(chat, "What is in my workspace?")
    streaming = chat.locator(".msg-streaming")
    expect(streaming).to_be_visible()
    expect(chat.locator(".live-slot .tool-card[data-tool=ls]")).to_be_visible()  # streamed, before it is stored
    shot(chat, artifacts, "stream-tool-call")
    # One answer, one card: once the answer is there its tool call is a folded step.
    open_steps(chat, chat.locator(".stable-list .msg-assistant").last)
    card = chat.locator(".stable-list .tool-card[data-tool=ls]")
    expect(card.locator(".tool-status")).to_have_text("✓")
    card.locator("summary").click()
    expect(card.locator(".tool-output")).to_contain_text("notes.md")
    final = chat.locator(".stable-list .msg-assistant").last
    expect(final.locator(".markdown strong")).to_have_text("notes.md")
    wait_idle(chat)
    expect(chat.locator(".msg-streaming")).to_have_count(0)
    expect(chat.locator(".run-state")).to_have_attribute("data-state", "completed")
    assert chat.locator(".stable-list .msg-assistant .thinking").count() == 1  # collapsed by default
    expect(chat.locator(".thinking-text")).to_have_count(0)
    expect(chat.locator(".msg-assistant .usage").first).to_contain_text("$")
    expect(chat.locator(".context-usage")).to_contain_text("/ 64k tokens")
    # The browser's snapshot is the server's snapshot.
    assert store_eval(chat, "s.snapshot") == server_snapshot(chat)


def tree_row(page, text: str, kind: str = ""):
    return page.locator(f".tree-row{'.kind-' + kind if kind else ''}", has_text=text)


def test_continue_from_the_first_message_branches_and_switching_back_summarizes(chat, artifacts):
    send(chat, "first question")
    expect(chat.locator(".stable-list .msg-assistant")).to_contain_text("Noted: first question")
    wait_idle(chat)
    send(chat, "second question")
    expect(chat.locator(".stable-list .msg-assistant").last).to_contain_text("Noted: second question")
    wait_idle(chat)
    first = chat.locator(".msg-user", has_text="first question")
    first.get_by_role("button", name="Continue from here").click()
    expect(chat.locator("#composer-input")).to_have_value("first question")
    expect(chat.locator(".branch-banner")).to_contain_text("new branch")
    shot(chat, artifacts, "branch-banner")
    chat.fill("#composer-input", "first question, asked differently")
    chat.press("#composer-input", "Enter")
    # An edit is an everyday move: it never asks about a summary (the tree's moves may).
    dialog = chat.get_by_role("dialog", name="Summarize the branch you are leaving?")
    expect(chat.locator(".stable-list .msg-assistant").last).to_contain_text("Noted: first question, asked differently")
    expect(dialog).to_be_hidden()
    wait_idle(chat)
    expect(chat.locator(".stable-list")).not_to_contain_text("second question")
    # Two branches in the tree, with the branch point marked.
    expect(chat.locator(".tree-row .branch-badge")).to_have_text("⎇ 2")
    expect(tree_row(chat, "second question", "user")).to_have_count(1)
    expect(tree_row(chat, "asked differently", "user")).to_have_class(re.compile("on-path"))
    expect(tree_row(chat, "Noted: second question")).not_to_have_class(re.compile("on-path"))
    shot(chat, artifacts, "two-branches")
    # Switch back to the old branch's answer, with a branch summary.
    tree_row(chat, "Noted: second question").click()
    chat.get_by_role("button", name="Go here").click()
    dialog.get_by_role("button", name="Summarize and switch").click()
    summary = chat.locator(".stable-list .msg-branch-summary")
    expect(summary).to_be_visible()
    expect(chat.locator(".stable-list")).to_contain_text("second question")
    expect(chat.locator(".stable-list")).not_to_contain_text("asked differently")
    summary.locator("summary").click()
    expect(summary).to_contain_text("Summary: the user asked a second question")
    expect(tree_row(chat, "branch summary")).to_have_class(re.compile("is-leaf"))
    assert store_eval(chat, "s.snapshot") == server_snapshot(chat)


def test_reload_mid_stream_still_gets_the_full_answer(chat, artifacts):
    send(chat, "answer slowly please")
    chat.wait_for_function("() => (document.querySelector('.msg-streaming')?.textContent ?? '').includes('Sentence 3 ')")
    chat.reload()
    chat.wait_for_selector("html[data-conversation-ready]")
    # The in-flight entry comes back with the snapshot and keeps streaming.
    expect(chat.locator(".msg-streaming")).to_be_visible()
    shot(chat, artifacts, "reload-mid-stream")
    final = chat.locator(".stable-list .msg-assistant").last
    expect(final).to_contain_text("Sentence 14 of a slow answer", timeout=30_000)
    assert final.locator(".markdown").inner_text().strip() == SLOW_TEXT
    wait_idle(chat)


POST_JSON = """async ([path, body]) => {
  const csrf = document.cookie.match(/csrftoken=([^;]+)/)[1];
  const id = window.neta.data.sessionId;
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`/api/sessions/${id}/${path}`, {method: 'POST', credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf}, body: JSON.stringify(body)});
    if (r.status < 300) return r.status;
    if (r.status !== 409) throw new Error(`${path}: HTTP ${r.status}`);
    await new Promise((ok) => setTimeout(ok, 100));  // busy: the previous run is finishing
  }
  throw new Error(`${path}: still busy`);
}"""


def test_a_killed_socket_reconnects_and_resyncs(chat, artifacts):
    send(chat, "hello before the cut")
    expect(chat.locator(".stable-list .msg-assistant")).to_contain_text("Noted: hello before the cut")
    wait_idle(chat)
    first_user = store_eval(chat, "s.snapshot.activePath.find((id) => s.entry(id).message?.role === 'user')")
    chat.evaluate("() => window.neta.connection.drop({ holdMs: 600000 })")
    expect(chat.locator(".connection")).to_have_attribute("data-state", "reconnecting")
    shot(chat, artifacts, "socket-killed")
    # While the socket is down, more happens than the event log keeps (NETA_EVENT_LOG_SIZE=10):
    # two prompts, then 70 label changes (the log is pruned every 64 revisions).
    for i in range(2):
        chat.evaluate(POST_JSON, ["prompt/", {"text": f"written while offline {i}"}])
    for i in range(70):
        chat.evaluate(POST_JSON, ["labels/", {"entryId": first_user, "label": f"label {i}"}])
    assert store_eval(chat, "s.connection.state") == "reconnecting"
    chat.get_by_role("button", name="Reconnect now").click()
    expect(chat.locator(".connection")).to_have_attribute("data-state", "live", timeout=20_000)
    expect(chat.locator(".stable-list .msg-assistant").last).to_contain_text("Noted: written while offline 1", timeout=20_000)
    wait_idle(chat)
    expect(chat.locator(".msg-user .entry-label")).to_have_text("# label 69")
    counters = store_eval(chat, "s.counters")
    assert counters["resyncs"] == 1, counters  # the log no longer reached back: a fresh snapshot
    assert store_eval(chat, "s.snapshot") == server_snapshot(chat)
    shot(chat, artifacts, "socket-resynced")
    # A short cut is filled from the event log instead.
    chat.evaluate("() => window.neta.connection.drop({ holdMs: 600000 })")
    expect(chat.locator(".connection")).to_have_attribute("data-state", "reconnecting")
    chat.evaluate(POST_JSON, ["labels/", {"entryId": first_user, "label": "after a short cut"}])
    chat.get_by_role("button", name="Reconnect now").click()
    expect(chat.locator(".msg-user .entry-label")).to_have_text("# after a short cut")
    counters = store_eval(chat, "s.counters")
    assert counters["resyncs"] == 1 and counters["replayed"] >= 1, counters
    assert store_eval(chat, "s.snapshot") == server_snapshot(chat)
    # This test's own retries while a run was finishing (409 session_busy) are expected.
    chat.console.errors[:] = [e for e in chat.console.errors if "409 (Conflict)" not in e]


def test_abort_a_run(chat, artifacts):
    send(chat, "count sheep forever")
    expect(chat.locator(".msg-streaming")).to_contain_text("one more sheep")
    abort = chat.get_by_role("button", name="Abort")
    expect(abort).to_be_visible()
    abort.click()
    aborted = chat.locator(".stable-list .msg-assistant.msg-aborted")
    expect(aborted).to_be_visible()
    expect(aborted).to_contain_text("Aborted")
    expect(chat.locator(".run-state")).to_have_attribute("data-state", "aborted")
    expect(chat.get_by_role("button", name="Abort")).to_have_count(0)
    expect(aborted.get_by_role("button", name="Retry")).to_be_visible()
    shot(chat, artifacts, "aborted")


def test_queue_a_follow_up_while_running(chat, artifacts):
    # Waits on state, not on time: a loaded machine may take long, never the wrong path.
    send(chat, "answer slowly please")
    chat.wait_for_function("() => window.neta.store.running")
    expect(chat.locator(".msg-streaming")).to_be_visible()
    chat.fill("#composer-input", "and then this")
    expect(chat.get_by_role("button", name="Queue")).to_be_visible()
    expect(chat.get_by_label("Deliver as")).to_have_value("follow_up")
    shot(chat, artifacts, "queue-follow-up")
    chat.press("#composer-input", "Enter")
    # Queued (the ack said so): listed until the run takes it, however long that is.
    queued = chat.get_by_role("list", name="Queued messages")
    expect(queued).to_contain_text("and then this", timeout=60_000)
    expect(queued).to_contain_text("Follow-up")
    answered(chat, "and then this", "Noted: and then this", timeout=120_000)
    expect(queued).to_have_count(0)
    texts = chat.locator(".stable-list .msg-user").all_inner_texts()
    assert [t.split("\n")[0] for t in texts] == ["answer slowly please", "and then this"]
    # A follow-up: it comes after the slow answer, in the same run.
    roles = store_eval(chat, "s.snapshot.activePath.map((id) => s.entry(id)).filter((e) => e.type === 'message').map((e) => e.message.role)")
    assert roles == ["user", "assistant", "user", "assistant"], roles
    runs = chat.evaluate(
        "async () => (await (await fetch(`/api/runs/?session=${window.neta.data.sessionId}&limit=5`)).json()).results.length"
    )
    assert runs == 1


def test_tree_keyboard_label_filters_and_fork(chat, artifacts):
    send(chat, "one")
    expect(chat.locator(".stable-list .msg-assistant")).to_contain_text("Noted: one")
    wait_idle(chat)
    send(chat, "two")
    expect(chat.locator(".stable-list .msg-assistant").last).to_contain_text("Noted: two")
    wait_idle(chat)
    tree = chat.get_by_role("tree", name="Entries of this session")
    tree.focus()
    tree.press("Home")  # the model and thinking-level entries before it are folded (bookkeeping)
    expect(chat.locator(".tree-row.selected")).to_contain_text("one")
    tree.press("l")
    chat.get_by_placeholder("Label (empty clears it)").fill("start here")
    # A patch arriving while the label is typed re-renders the sidebar; the text must survive it.
    chat.evaluate(
        """async () => {
          const token = decodeURIComponent(document.cookie.match(/csrftoken=([^;]+)/)[1]);
          const r = await fetch(`/api/sessions/${window.neta.data.sessionId}/`, {
            method: 'PATCH', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
            body: JSON.stringify({title: 'Renamed mid-edit'}),
          });
          if (!r.ok) throw new Error(`rename failed: ${r.status}`);
        }"""
    )
    expect(chat.get_by_role("heading", level=1)).to_have_text("Renamed mid-edit")
    expect(chat.get_by_placeholder("Label (empty clears it)")).to_have_value("start here")
    chat.get_by_placeholder("Label (empty clears it)").press("Enter")
    expect(chat.locator(".tree-row .row-label")).to_have_text("start here")
    expect(chat.locator(".msg-user .entry-label")).to_contain_text("start here")
    chat.get_by_role("radio", name="Labeled").click()
    rows = chat.locator(".tree-row")
    # The labeled entry, and the leaf, always shown: the label entry is folded into the answer
    # it follows, which carries the leaf mark.
    expect(rows).to_have_count(2)
    expect(chat.locator(".tree-row.is-leaf.kind-label")).to_have_count(0)
    expect(chat.locator(".tree-row.is-leaf.kind-assistant")).to_have_count(1)
    chat.get_by_role("radio", name="Messages").click()
    expect(rows).to_have_count(4)  # four messages, the last one holding the leaf
    expect(chat.locator(".tree-row.kind-model_change")).to_have_count(0)
    shot(chat, artifacts, "tree-filtered")
    chat.get_by_role("radio", name="All").click()
    old = chat.url
    tree.focus()
    tree.press("f")  # fork at the selected (labeled) prompt: Pi's rule, the path before it and the prompt in the composer
    chat.wait_for_url(lambda url: url != old and "/sessions/" in url)
    chat.wait_for_selector("html[data-conversation-ready]")
    expect(chat.locator(".stable-list .msg-user")).to_have_count(0)
    expect(chat.locator("#composer-input")).to_have_value("one")


def test_rename_the_session_from_the_top_bar(chat, artifacts):
    heading = chat.get_by_role("heading", level=1)
    expect(heading).to_have_text("New session")  # nothing in it yet: a fresh session, not an "Untitled" one
    chat.get_by_role("button", name="Rename the session").click()
    editor = chat.get_by_label("Session title")
    editor.fill("Trees, branches and leaves")
    editor.press("Escape")  # gives up
    expect(heading).to_have_text("New session")
    chat.get_by_role("button", name="Rename the session").click()
    editor.fill("  Trees, branches and leaves  ")
    shot(chat, artifacts, "rename")
    editor.press("Enter")
    expect(heading).to_have_text("Trees, branches and leaves")
    expect(chat).to_have_title("Trees, branches and leaves · Neta")
    tree = chat.get_by_role("tree", name="Entries of this session")
    # Pi's session_info entry: bookkeeping, folded until the tree's Notes show it.
    expect(tree.get_by_role("treeitem", name=re.compile("Trees, branches and leaves"))).to_have_count(0)
    chat.get_by_role("button", name="Notes").click()
    expect(tree.get_by_role("treeitem", name=re.compile("Trees, branches and leaves"))).to_have_count(1)
    chat.reload()
    chat.wait_for_selector("html[data-conversation-ready]")
    expect(heading).to_have_text("Trees, branches and leaves")
    expect(chat.get_by_role("navigation", name="Sessions")).to_contain_text("Trees, branches and leaves")
    # An empty title is not sent.
    chat.get_by_role("button", name="Rename the session").click()
    editor.fill("   ")
    editor.press("Enter")
    expect(heading).to_have_text("Trees, branches and leaves")


def test_image_upload_is_sent_with_the_prompt(chat, artifacts, tmp_path):
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a3a0d3f40000000049454e44ae426082"
    )
    path = tmp_path / "dot.png"
    path.write_bytes(png)
    chat.locator("input[type=file]").set_input_files(str(path))
    expect(chat.get_by_role("list", name="Attached images").locator("img")).to_have_count(1)
    send(chat, "what is in this picture")
    expect(chat.locator(".stable-list .msg-user img.msg-image")).to_have_count(1)
    expect(chat.get_by_role("list", name="Attached images")).to_have_count(0)
    expect(chat.locator(".stable-list .msg-assistant")).to_contain_text("Noted: what is in this picture")
    wait_idle(chat)
    shot(chat, artifacts, "image-sent")


def test_phone_width_and_accessible_names(browser, server, artifacts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    login(page, server.base_url)
    # A touch screen: Enter is a new line, the Send button sends.
    page.fill("#composer-input", "hello from a phone")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".stable-list .msg-assistant")).to_contain_text("Noted: hello from a phone")
    expect(page.locator(".tree-sidebar")).to_have_count(0)  # closed on a phone
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390  # nothing sticks out sideways
    shot(page, artifacts, "phone-chat")
    page.get_by_role("button", name="Session tree").click()
    expect(page.locator(".tree-sidebar")).to_be_visible()
    shot(page, artifacts, "phone-tree")
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('button, a, textarea, select, input:not([type=hidden]), [role=tree], [role=treeitem]')]
              .filter((el) => !(el.getAttribute('aria-label') || el.textContent.trim() || el.labels?.length || el.getAttribute('title')))
              .map((el) => el.outerHTML.slice(0, 120))"""
    )
    assert unnamed == []
    context.close()
