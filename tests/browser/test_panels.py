"""The chat page's runtime panels in Chromium against the real Daphne: a plan
that updates as the model works and is right after a branch switch, a question answered
from a second tab, a delegate turn with two real child processes shown live and the same
after a reload, one child cancelled, and phone width. Screenshots: docs/screenshots/panels-*.png."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support import browser as support
from tests.support.browser import Console, login, open_steps, send, store_eval, wait_idle

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

RELEASE = "@release"  # in the rules: the file (in the server's var dir) that ends the children's pause


def release_file(server) -> Path:
    return server.var_dir / "panels-children-may-finish"


TODO_A1 = [{"content": "Look at the workspace", "status": "in_progress"}, {"content": "Write the answer", "status": "pending"}]
TODO_A2 = [{"content": "Look at the workspace", "status": "completed"}, {"content": "Write the answer", "status": "in_progress"}]
TODO_B = [{"content": "Answer the other question", "status": "completed"}]
RULES = {
    "version": 1,
    "chunk_size": 4,
    "delay_ms": 15,
    "rules": [
        {"match": {"contains": "cleaning delegate"}, "replies": [
            [{"text": "A careful subagent will clean it."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "panels-careful", "task": "clean the build please"},
            ]}}}],
            [{"text": "The subagent reported back."}],
        ]},
        {"match": {"contains": "child task three"}, "reply": {"steps": [{"text": "Trying."}], "error": "503 the model is overloaded"}},
        {"match": {"contains": "quick child"}, "reply": [{"text": "Quick and done."}]},
        {"match": {"contains": "frozen child"}, "reply": [{"text": "This will take a long while."}, {"pause_ms": 120000}, {"text": "never shown"}]},
        {"match": {"contains": "slow child"}, "reply": [{"text": "Slowly, slowly."}, {"pause_ms": 120000}, {"text": "never shown"}]},
        {"match": {"contains": "budget delegate"}, "replies": [
            [{"text": "Four subagents on a tight budget."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "panels", "task": "child task one: list the files"},
                {"agent": "panels", "task": "quick child: say hello"},
                {"agent": "panels", "task": "child task three: this one fails"},
                {"agent": "panels", "task": "frozen child: think for a long time"},
            ]}}}],
            [{"text": "The budget batch is over."}],
        ]},
        {"match": {"contains": "slow delegate"}, "replies": [
            [{"text": "Two slow subagents."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "panels", "task": "slow child one"},
                {"agent": "panels", "task": "slow child two"},
            ]}}}],
            [{"text": "The slow ones were stopped."}],
        ]},
        {"match": {"contains": "child task"}, "replies": [
            [{"text": "Child here: I list the workspace first."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}],
            # Held while the page is looked at; the test lets them go (RELEASE) once it cancelled one.
            [{"pause_ms": 45000, "until_file": RELEASE}, {"text": "The workspace holds **notes.md** and `src/`."}],
        ]},
        {"match": {"contains": "delegate"}, "replies": [
            [{"text": "Two subagents will look in parallel."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "panels", "task": "child task one: list the files"},
                {"agent": "panels", "task": "child task two: describe the workspace"},
                {"agent": "panels", "task": "child task three: this one fails"},
            ]}}}],
            [{"text": "Both subagents reported back."}],
        ]},
        {"match": {"contains": "make a plan"}, "replies": [
            [{"text": "My plan:"}, {"tool_call": {"name": "todo", "arguments": {"todos": TODO_A1}}}],
            [{"pause_ms": 1200}, {"tool_call": {"name": "todo", "arguments": {"todos": TODO_A2}}}],
            [{"text": "Planned and done."}],
        ]},
        {"match": {"contains": "other plan"}, "replies": [
            [{"tool_call": {"name": "todo", "arguments": {"todos": TODO_B}}}],
            [{"text": "The other plan is done."}],
        ]},
        {"match": {"contains": "tidy the readme"}, "replies": [
            [{"text": "First the file."}, {"tool_call": {"name": "write", "arguments": {"path": "readme-tidy.md", "content": "# Title\n\nan untidy line\n\nThe end.\n"}}}],
            [{"text": "Now the change."}, {"tool_call": {"name": "edit", "arguments": {"path": "readme-tidy.md", "edits": [{"oldText": "an untidy line", "newText": "A tidy line."}]}}}],
            [{"text": "Tidied: {{result}}"}],
        ]},
        {"match": {"contains": "clean the build"}, "replies": [
            [{"text": "I will clean it."}, {"tool_call": {"name": "bash", "arguments": {"command": "echo cleaned the build folder"}}}],
            [{"text": "Result: {{result}}"}],
        ]},
        {"match": {"contains": "ask me"}, "replies": [
            [{"text": "I need a decision."}, {"tool_call": {"name": "ask_user", "arguments": {
                "question": "Which format do you want?", "options": ["A short paragraph", "A bullet list"], "allow_free_text": True}}}],
            [{"text": "Thanks. {{result}}"}],
        ]},
    ],
    "default": {"reply": [{"text": "Noted: {{user}}"}]},
}

SETUP = """
import json
from runtime.models import Agent, ModelConfig
rules = json.loads({rules!r})
model, _ = ModelConfig.objects.update_or_create(
    name="panels-scripted",
    defaults=dict(display_name="Panels scripted", provider_kind="scripted", provider_name="scripted", model_id="panels-scripted",
                  context_window=64000, max_output_tokens=4096, supports_thinking=True, price_input=1, price_output=2,
                  options={{"rules": rules}}),
)
Agent.objects.update_or_create(name="panels-budget", defaults=dict(
    model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="never", description="panels tests: tight child budgets",
    subagent_policy={{"enabled": True, "agents": ["panels"], "child_budget": {{"max_turns": 1, "idle_seconds": 5}}}},
))
Agent.objects.update_or_create(name="panels-careful", defaults=dict(
    model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="never", description="panels tests: approvals",
    tool_policy={{"approval": "ask_changes"}},
))
Agent.objects.update_or_create(name="panels-boss", defaults=dict(
    model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="never", description="panels tests: a careful child",
    subagent_policy={{"enabled": True, "agents": ["panels-careful"], "child_budget": {{"idle_seconds": 60}}}},
))
Agent.objects.update_or_create(name="panels", defaults=dict(
    model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="never", description="panels tests",
    subagent_policy={{"enabled": True, "agents": ["panels"], "child_budget": {{"idle_seconds": 60}}}},
))
"""


STAFF = f"""
from django.contrib.auth import get_user_model
if not get_user_model().objects.filter(username="panels-operator").exists():
    get_user_model().objects.create_superuser("panels-operator", "operator@example.com", {support.PASSWORD!r})
"""


@pytest.fixture(scope="module")
def panels_agent(server):
    rules = json.dumps(RULES).replace(json.dumps(RELEASE), json.dumps(str(release_file(server))))
    server.python(SETUP.format(rules=rules))
    return "panels"


def shot(page, artifacts, name: str) -> None:
    support.shot(page, artifacts, name, name)


def open_page(browser, server, viewport=DESKTOP, agent="panels"):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.console = Console(page)
    login(page, server.base_url, path=f"/?agent={agent}")
    return context, page


def close_drawers(page) -> None:
    """At phone width the side panels are drawers; a desktop page resized keeps them open."""
    for toggle in (".tree-toggle", "button[aria-label=Sessions]"):
        button = page.locator(toggle)
        if button.get_attribute("aria-pressed") == "true":
            button.click()


def shot_both_widths(page, artifacts, panel, name: str) -> None:
    """The panel at desktop width, then at phone width (drawers closed, no sideways scroll);
    the page is left at phone width."""
    panel.scroll_into_view_if_needed()
    shot(page, artifacts, f"{name}-1440")
    page.set_viewport_size(PHONE)
    close_drawers(page)
    panel.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, artifacts, f"{name}-390")


def test_plan_follows_the_branch_and_a_question_is_answered_from_another_tab(browser, server, panels_agent, artifacts):
    context, page = open_page(browser, server)
    plan = page.locator(".plan-panel")
    send(page, "make a plan please")
    expect(plan).to_have_attribute("data-done", "0")  # the first todo call
    expect(plan.locator(".plan-current")).to_have_text("Look at the workspace")
    expect(plan).to_have_attribute("data-done", "1")  # updated as the model works
    expect(plan.locator(".plan-current")).to_have_text("Write the answer")
    wait_idle(page)
    expect(plan.locator(".plan-count")).to_have_text("1 of 2 done")
    expect(plan.locator("[role=progressbar]")).to_have_attribute("aria-valuenow", "1")
    shot(page, artifacts, "panels-plan-1440")
    branch_a = store_eval(page, "s.snapshot.leafId")
    # Collapsed, the plan keeps its head only.
    plan.locator(".panel-toggle").click()
    expect(plan.locator(".todo-list")).to_have_count(0)
    plan.locator(".panel-toggle").click()
    expect(plan.locator(".todo-item")).to_have_count(2)

    # Another plan on a new branch from the first message, then back: each branch has its own.
    first_user = store_eval(page, "s.snapshot.activePath.find((id) => s.entry(id).message?.role === 'user')")
    page.evaluate("(id) => window.neta.connection.send('prompt', {text: 'the other plan', mode: 'follow_up', fromEntryId: id})", first_user)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("The other plan is done.")
    wait_idle(page)
    expect(plan).to_have_count(0)  # a finished plan is not pinned once its run is over (its card keeps it)
    page.evaluate("(id) => window.neta.connection.send('switch_leaf', {entryId: id, summarize: false})", branch_a)
    expect(plan.locator(".plan-count")).to_have_text("1 of 2 done")
    expect(plan.locator(".todo-item").first).to_contain_text("Look at the workspace")
    # A reload rebuilds the same plan from the path (and keeps it collapsed or open as it was).
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(plan.locator(".plan-count")).to_have_text("1 of 2 done")
    expect(plan.locator(".plan-current")).to_have_text("Write the answer")

    # A question: the run waits (persisted), a second tab sees it and answers it.
    send(page, "now ask me something")
    question = page.locator(".clarify-panel")
    expect(question).to_be_visible()
    expect(question.locator(".clarify-question")).to_have_text("Which format do you want?")
    expect(page.locator(".run-state")).to_have_attribute("data-state", "waiting")
    expect(page.locator(".stable-list .tool-card[data-tool=ask_user] .tool-status")).to_have_text("waiting for you")
    shot(page, artifacts, "panels-question-1440")
    other = context.new_page()
    other.console = Console(other)
    other.goto(page.url)
    other.wait_for_selector("html[data-conversation-ready]")
    expect(other.locator(".clarify-panel .option-button")).to_have_count(2)
    run = other.evaluate(
        "async () => (await (await fetch(`/api/runs/?session=${window.neta.data.sessionId}&limit=1`)).json()).results[0]"
    )
    assert run["status"] == "waiting" and run["question"]["options"] == ["A short paragraph", "A bullet list"]
    other.locator(".clarify-panel .option-button", has_text="A bullet list").click()
    expect(page.locator(".clarify-panel")).to_have_count(0)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Thanks. The user answered: A bullet list")
    wait_idle(page)
    expect(page.locator(".run-state")).to_have_attribute("data-state", "completed")
    expect(other.locator(".clarify-panel")).to_have_count(0)
    other.close()

    # Phone width: the plan and a question fit; the free-text answer works.
    page.set_viewport_size(PHONE)
    close_drawers(page)
    send(page, "ask me once more")
    expect(question).to_be_visible()
    # On a phone the plan gives the question room: its head only while the question waits.
    expect(plan.locator(".panel-toggle")).to_have_attribute("aria-expanded", "false")
    expect(plan.locator(".todo-list")).to_have_count(0)
    expect(plan.locator(".plan-current")).to_have_text("Write the answer")
    shot(page, artifacts, "panels-question-390")
    page.fill("#clarify-input", "In one line")
    page.locator(".clarify-panel button[type=submit]").click()
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Thanks. The user answered: In one line")
    wait_idle(page)
    expect(plan.locator(".todo-item")).to_have_count(2)  # open again, as the reader left it
    shot(page, artifacts, "panels-plan-390")
    # An unanswered question expires (the server's reaper round, every 10 s) with a clear result.
    send(page, "ask me, and I will not answer")
    expect(question).to_be_visible()
    server.python(
        "from runtime.models import AgentRun\n"
        "run = AgentRun.objects.get(status='waiting')\n"
        "AgentRun.objects.filter(pk=run.pk).update(question={**run.question, 'expiresAt': run.question['askedAt']})\n"
    )
    expect(question).to_have_count(0, timeout=40_000)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("the question expired")
    open_steps(page, page.locator(".stable-list .msg-assistant").last)
    expect(page.locator(".stable-list .tool-card[data-tool=ask_user]").last.locator(".tool-status")).to_have_text("✗ error")
    # Abort while a question waits: the question goes, its card says why, the run is aborted.
    send(page, "ask me, then I abort")
    expect(question).to_be_visible()
    page.get_by_role("button", name="Abort").click()
    expect(question).to_have_count(0)
    expect(page.locator(".run-state")).to_have_attribute("data-state", "aborted")
    card = page.locator(".stable-list .tool-card[data-tool=ask_user]").last
    expect(card.locator(".tool-status")).to_have_text("✗ error")
    expect(card).to_contain_text("aborted while this question waited")
    wait_idle(page)
    box = page.locator(".plan-panel").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.screenshot(path=str(artifacts / "panels-plan-question-end.png"))
    assert page.console.errors == [], page.console.errors
    context.close()


def test_a_delegate_turn_shows_its_children_live_and_after_a_reload(browser, server, panels_agent, artifacts):
    release_file(server).unlink(missing_ok=True)
    context, page = open_page(browser, server)
    send(page, "please delegate this")
    panel = page.locator(".live-slot .subagent-panel")
    rows = panel.locator(".subagent-row")
    expect(rows).to_have_count(3, timeout=60_000)
    expect(rows.nth(0).locator(".subagent-task")).to_have_text("child task one: list the files")
    # Both children run as processes and report live (their first text, then their tool).
    expect(rows.nth(0).locator(".state-badge")).to_have_attribute("data-state", "running")
    expect(rows.nth(1).locator(".subagent-activity")).to_contain_text("ls")
    expect(rows.nth(0).locator(".subagent-activity")).to_contain_text("ls")
    live_states = [rows.nth(i).get_attribute("data-status") for i in range(2)]
    assert live_states == ["running", "running"], live_states
    expect(rows.nth(2)).to_have_attribute("data-status", "failed")  # the third one's model fails at once
    expect(rows.nth(2).locator(".subagent-why")).to_contain_text("503 the model is overloaded")
    rows.nth(0).locator(".subagent-expand").click()
    expect(rows.nth(0).locator(".child-stream")).to_contain_text("Child here: I list the workspace first.")
    expect(rows.nth(0).locator(".child-stream .tool-card[data-tool=ls]")).to_have_count(1)
    expect(page.locator(".stable-list .tool-card[data-tool=delegate_parallel] .tool-summary")).to_have_text("3 tasks: panels, panels, panels")
    shot(page, artifacts, "panels-subagents-1440")
    # The tree's batch node while it runs: the panel below the conversation is shown.
    page.locator(".tree-row.kind-subagent_batch").click()
    expect(panel).to_have_class(re.compile(r"\brevealed\b"))

    # The same batch, live, on a phone (another tab): rows, badges and Cancel fit the width.
    phone_context = browser.new_context(viewport=PHONE)
    phone = phone_context.new_page()
    phone.console = Console(phone)
    phone_context.add_cookies(context.cookies())
    phone.goto(page.url)
    phone.wait_for_selector("html[data-conversation-ready]")
    phone_rows = phone.locator(".live-slot .subagent-panel .subagent-row")
    try:
        expect(phone_rows).to_have_count(3, timeout=30_000)
    except AssertionError:
        phone.screenshot(path=str(artifacts / "panels-phone-tab-failed.png"))
        raise
    expect(phone_rows.nth(0)).to_have_attribute("data-status", "running")
    expect(phone_rows.nth(2).locator(".subagent-why")).to_contain_text("503 the model is overloaded")
    phone_rows.nth(0).locator(".subagent-expand").click()
    expect(phone_rows.nth(0).locator(".child-stream")).to_contain_text("Child here")
    phone.locator(".live-slot .subagent-panel").scroll_into_view_if_needed()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, artifacts, "panels-subagents-live-390")
    assert phone.console.errors == [], phone.console.errors
    phone_context.close()

    # A reload mid-batch: the same rows from the tree entry, the stream from the replay endpoint.
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    expect(rows).to_have_count(3)
    assert [rows.nth(i).get_attribute("data-status") for i in range(3)] == ["running", "running", "failed"]
    # Rows not opened show what they showed before the reload (from the replay endpoint).
    expect(rows.nth(1).locator(".subagent-activity")).to_contain_text("ls", timeout=20_000)
    expect(rows.nth(1).locator(".subagent-usage")).to_contain_text("tok", timeout=20_000)
    expect(rows.nth(2).locator(".subagent-why")).to_contain_text("503 the model is overloaded", timeout=20_000)
    rows.nth(0).locator(".subagent-expand").click()
    expect(rows.nth(0).locator(".child-stream")).to_contain_text("Child here: I list the workspace first.")
    expect(rows.nth(0).locator(".child-stream .tool-card[data-tool=ls]")).to_have_count(1)

    # Cancel the second child: it ends cancelled, the first completes, the batch says so.
    rows.nth(1).get_by_role("button", name="Cancel subagent 2").click()
    expect(rows.nth(1)).to_have_attribute("data-status", "cancelled")
    release_file(server).touch()  # the first child goes on and completes
    wait_idle(page, timeout=60_000)
    final = page.locator(".stable-list .subagent-panel")
    done_rows = final.locator(".subagent-row")
    expect(done_rows).to_have_count(3)
    expect(done_rows.nth(0)).to_have_attribute("data-status", "completed")
    expect(done_rows.nth(1)).to_have_attribute("data-status", "cancelled")
    expect(done_rows.nth(1).locator(".state-badge")).to_have_attribute("data-state", "aborted")
    expect(done_rows.nth(1).locator(".subagent-why")).to_contain_text("cancelled")
    expect(done_rows.nth(2)).to_have_attribute("data-status", "failed")
    expect(done_rows.nth(2).locator(".state-badge")).to_have_attribute("data-state", "failed")
    expect(done_rows.nth(2).locator(".subagent-why")).to_contain_text("failed (llm_error)")
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Both subagents reported back.")
    # The tree shows the batch and result nodes with their own icons and statuses.
    tree = page.locator(".tree-row.kind-subagent_batch")
    expect(tree).to_have_count(1)
    expect(tree.locator(".state-badge")).to_have_count(1)
    expect(page.locator(".tree-row.kind-subagent_result .state-badge")).to_have_count(3)
    expect(page.locator(".tree-row.kind-subagent_batch .state-badge")).to_have_attribute("data-state", "failed")  # its worst child
    # Tree → conversation: a result row shows its batch's panel (scrolled to, flashed).
    page.locator(".conversation").evaluate("(el) => el.scrollTo(0, 0)")
    page.locator(".tree-row.kind-subagent_result").nth(1).click()
    expect(page.locator(".stable-list .msg-subagents.revealed")).to_have_count(1)
    expect(done_rows.nth(1)).to_have_class(re.compile(r"\brevealed\b"))  # the cancelled child's own row
    expect(done_rows.nth(1)).to_be_in_viewport()
    page.locator(".conversation").evaluate("(el) => el.scrollTo(0, 0)")
    page.locator(".tree-row.kind-subagent_batch").click()
    expect(page.locator(".stable-list .msg-subagents.revealed")).to_have_count(1)
    expect(final).to_be_in_viewport()
    done_rows.nth(0).locator(".subagent-expand").click()
    expect(done_rows.nth(0).locator(".child-stream")).to_contain_text("notes.md")
    shot_both_widths(page, artifacts, final, "panels-subagents-done")
    assert page.console.errors == [], page.console.errors
    context.close()


def test_every_way_a_child_ends_looks_distinct_and_says_why_and_cancel_all(browser, server, panels_agent, artifacts):
    """Real children under a tight budget (max_turns 1, idle 5 s): one stopped by the turn
    budget (partial), one completed, one failed, one frozen (SIGSTOP) until the host's idle
    limit kills it (timed out); then a batch stopped with Cancel all."""
    context, page = open_page(browser, server, agent="panels-budget")
    send(page, "budget delegate please")
    live = page.locator(".live-slot .subagent-panel")
    rows = live.locator(".subagent-row")
    expect(rows).to_have_count(4, timeout=60_000)  # four child processes start on a loaded machine
    expect(rows.nth(3).locator(".subagent-activity")).to_contain_text("writing", timeout=60_000)  # the frozen one has started its answer
    pid = store_eval(page, "[...s.subagents.values()].find((c) => c.taskIndex === 3)?.pid")
    assert isinstance(pid, int) and pid > 1, pid
    os.killpg(os.getpgid(pid), signal.SIGSTOP)  # no more heartbeats: the host's idle limit ends it
    wait_idle(page, timeout=90_000)
    final = page.locator(".stable-list .subagent-panel").last
    done = final.locator(".subagent-row")
    expect(done).to_have_count(4)
    assert [done.nth(i).get_attribute("data-status") for i in range(4)] == ["partial", "completed", "failed", "timed_out"]
    assert [done.nth(i).locator(".state-badge").get_attribute("data-state") for i in range(4)] == ["partial", "done", "failed", "timed-out"]
    expect(done.nth(0).locator(".subagent-why")).to_contain_text("stopped by the turn budget (budget_turns)")
    expect(done.nth(2).locator(".subagent-why")).to_contain_text("503 the model is overloaded")
    expect(done.nth(3).locator(".subagent-why")).to_contain_text("timed out (stalled)")
    expect(done.nth(3).locator(".state-badge")).to_have_text("timed out")
    # Four distinct colours on the rows' accents.
    colours = {done.nth(i).evaluate("(el) => getComputedStyle(el).borderLeftColor") for i in range(4)}
    assert len(colours) == 4, colours
    # The partial child's text so far is kept in its stream.
    done.nth(0).locator(".subagent-expand").click()
    expect(done.nth(0).locator(".child-stream")).to_contain_text("Child here: I list the workspace first.")
    shot_both_widths(page, artifacts, final, "panels-subagents-outcomes")
    page.set_viewport_size(DESKTOP)

    # Cancel all: every child still running is cancelled; the batch says so.
    send(page, "slow delegate now")
    rows = page.locator(".live-slot .subagent-panel .subagent-row")
    expect(rows).to_have_count(2, timeout=60_000)
    expect(rows.nth(0).locator(".subagent-activity")).to_contain_text("writing", timeout=60_000)
    expect(rows.nth(1).locator(".subagent-activity")).to_contain_text("writing", timeout=60_000)
    page.locator(".live-slot .subagent-panel").get_by_role("button", name="Cancel all").click()
    wait_idle(page, timeout=60_000)
    stopped = page.locator(".stable-list .subagent-panel").last
    expect(stopped).to_have_attribute("data-state", "aborted")
    expect(stopped.locator(".subagent-row[data-status=cancelled]")).to_have_count(2)
    expect(stopped.locator(".subagent-why").first).to_contain_text("cancelled")
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("The slow ones were stopped.")
    assert page.console.errors == [], page.console.errors
    context.close()


def test_a_changing_call_waits_for_allow_or_deny_in_the_page(browser, server, panels_agent, artifacts):
    """An agent in "ask for changes" mode: its bash call waits in the approval panel with the
    exact command; Allow once runs it, Deny (with a note) tells the model why."""
    context, page = open_page(browser, server, agent="panels-careful")
    panel = page.locator(".approval-panel")
    send(page, "clean the build please")
    expect(panel).to_be_visible()
    expect(panel.locator(".approval-command")).to_have_text("echo cleaned the build folder")
    expect(page.locator(".run-state")).to_have_attribute("data-state", "waiting")
    shot(page, artifacts, "approval-1440")
    panel.get_by_role("button", name="Allow once").click()
    expect(panel).to_have_count(0)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Result: cleaned the build folder")
    wait_idle(page)
    page.set_viewport_size(PHONE)
    close_drawers(page)
    send(page, "clean the build again")
    expect(panel).to_be_visible()
    shot(page, artifacts, "approval-390")
    page.fill("#approval-note", "not now, a build is running")
    panel.get_by_role("button", name="Deny").click()
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("denied this call")
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("not now, a build is running")
    wait_idle(page)
    session_id = store_eval(page, "s.sessionId")
    context.close()
    # The console's session page lists both decisions, newest first, with who and the command.
    server.python(STAFF)
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(server.base_url + f"/admin/sessions_tree/agentsession/{session_id}/change/")
    page.fill("#id_username", "panels-operator")
    page.fill("#id_password", support.PASSWORD)
    page.click("input[type=submit]")
    rows = page.locator("#session-decisions tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("denied")
    expect(rows.nth(0)).to_contain_text("not now, a build is running")
    expect(rows.nth(1)).to_contain_text("allowed once")
    expect(rows.nth(1)).to_contain_text("echo cleaned the build folder")
    expect(rows.nth(1)).to_contain_text("alice")
    page.locator("#session-decisions").scroll_into_view_if_needed()
    shot(page, artifacts, "console-session-approvals")
    context.close()


def test_an_edit_waits_with_its_diff_against_the_file(browser, server, panels_agent, artifacts):
    """The edit's panel shows the change to the file as it is (its lines around the change
    too), marked added and removed."""
    context, page = open_page(browser, server, agent="panels-careful")
    panel = page.locator(".approval-panel")
    send(page, "tidy the readme please")
    expect(panel.locator(".approval-path")).to_contain_text("a new file")  # the write: its content, all added
    expect(panel.locator(".approval-diff .diff-add").filter(has_text="an untidy line")).to_have_count(1)
    panel.get_by_role("button", name="Allow once").click()
    diff = panel.locator(".approval-diff")
    expect(diff).to_be_visible()
    expect(diff.locator(".diff-del")).to_have_text("-an untidy line\n")
    expect(diff.locator(".diff-add")).to_have_text("+A tidy line.\n")
    expect(diff.locator(".diff-ctx").filter(has_text="# Title")).to_have_count(1)
    shot(page, artifacts, "approval-edit-1440")
    page.set_viewport_size(PHONE)
    close_drawers(page)
    expect(diff).to_be_visible()
    shot(page, artifacts, "approval-edit-390")
    panel.get_by_role("button", name="Allow once").click()
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Tidied:")
    wait_idle(page)
    context.close()


def test_a_subagents_call_waits_in_the_parents_page_named_and_allow_runs_it(browser, server, panels_agent, artifacts):
    """A child agent in "ask for changes" mode: its bash call waits in the parent's page, in
    an approval panel that names the child and its task; Allow once lets the child run it,
    and the child's answer reaches the parent. Screenshots: docs/screenshots/approval-subagent-*.png."""
    context, page = open_page(browser, server, agent="panels-boss")
    panel = page.locator(".approval-panel[data-subagent-run-id]")
    send(page, "cleaning delegate please")
    expect(panel).to_be_visible()
    expect(panel.locator(".panel-title")).to_contain_text("Subagent panels-careful asks")
    expect(panel.locator(".approval-child")).to_contain_text("clean the build please")
    expect(panel.locator(".approval-command")).to_have_text("echo cleaned the build folder")
    shot_both_widths(page, artifacts, panel, "approval-subagent")
    page.set_viewport_size(DESKTOP)
    panel.get_by_role("button", name="Allow once").click()
    expect(panel).to_have_count(0)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("The subagent reported back.")
    wait_idle(page)
    result = page.evaluate(
        """async () => {
            const id = window.neta.store.sessionId;
            const runs = await (await fetch(`/api/sessions/${id}/subagent-runs/`)).json();
            return runs.map((r) => [r.agent, r.status]);
        }"""
    )
    assert result == [["panels-careful", "completed"]]
    context.close()
