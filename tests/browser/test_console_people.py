"""An operator's walk through the console in Chromium: give an agent another model
and restrict its tools, find a user's session and inspect its tree and context, reset its leaf
and delete it (file and runs gone), import a skill ZIP and see its fingerprint and who can use
it, watch a running prompt's entries arrive in a session page's live tree, rotate a token, and
read the audit entry of each. Takes
the console's screenshots (1440×900) for docs/console.md on the way."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, RULES, Console
from tests.support.services import REPO
from tests.support.skills import good, raw_zip

pytestmark = pytest.mark.slow

# The docs' screenshots are refreshed with NETA_CONSOLE_SCREENSHOTS=1; otherwise they go with
# the other browser artifacts (a test run leaves the tree clean).
SHOTS = REPO / "docs" / "screenshots" if os.environ.get("NETA_CONSOLE_SCREENSHOTS") == "1" else ARTIFACTS

SETUP = """
import json
from django.contrib.auth import get_user_model
from runtime.api.tokens import api_token_create
from runtime.models import Agent, ModelConfig
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
rules = json.loads({rules!r})
U = get_user_model()
root = U.objects.filter(username="root").first() or U.objects.create_superuser("root", "root@example.com", {password!r})
alice = U.objects.get(username="alice")
first = ModelConfig.objects.get(name="browser-scripted")
ModelConfig.objects.update_or_create(name="console-model", defaults=dict(
    display_name="Console model", provider_kind="scripted", provider_name="scripted", model_id="console-model",
    context_window=64000, max_output_tokens=4096, options={{"rules": rules}}))
from django.conf import settings
cwd = settings.VAR_DIR / "console-walk"  # its own: the browser agent shares the default workspace
cwd.mkdir(parents=True, exist_ok=True)
agent, _ = Agent.objects.update_or_create(name="console-walk", defaults=dict(model=first, cwd=str(cwd), description="the console walk"))
meta = session_start(agent=agent, user=alice, title="Alice asks about the console")
for text in ("hello console", "a second question"):
    execute_run(session_prompt(actor=alice, session_id=meta.session_id, text=text, dispatch=False).run.run_id)
from runtime.models import AgentRun, SubprocessEvent, SubprocessRun
parent = AgentRun.objects.filter(session_id=meta.session_id).latest("created_at")
child = SubprocessRun.objects.create(session_id=meta.session_id, batch_id="walk-batch", parent_run=parent, tool_call_id="call-1",
    task_index=0, mode="single", agent="console-walk", task="count to 60", status="completed")
SubprocessEvent.objects.bulk_create([SubprocessEvent(run=child, seq=i, type="assistant_delta", payload={{"kind": "text", "delta": f"step {{i}}"}}) for i in range(1, 61)])
token = api_token_create(user=alice, name="alice-ci").token
print(json.dumps({{"session": meta.session_id, "file": meta.session_file, "agent": agent.pk, "token": token.pk, "prefix": token.prefix, "child": str(child.run_id)}}))
"""

CHECK = """
import json, os
from runtime.models import AgentRun, Agent
from sessions_tree.models import AgentSession
agent = Agent.objects.select_related("model").get(name="console-walk")
print(json.dumps({{
    "session": AgentSession.objects.filter(session_id={sid!r}).exists(),
    "file": os.path.exists({file!r}),
    "runs": AgentRun.objects.filter(session_id={sid!r}).count(),
    "model": agent.model.name,
    "disabled": agent.tool_policy.get("disabled"),
}}))
"""


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"console-{name}.png"))


def succeeded(page) -> str:
    """The page's success message, or a failure that shows what the page said instead."""
    page.wait_for_selector(".messagelist .success, .errornote, .errorlist, #summary", state="attached")
    found = page.locator(".messagelist .success")
    assert found.count(), [page.locator(".errorlist, .errornote").nth(i).inner_text() for i in range(page.locator(".errorlist, .errornote").count())]
    return found.first.inner_text()


# A prompt sent as the logged-in staff member (the admin's session cookie and its CSRF token).
POST_PROMPT = """async ([sid, text]) => {
  const csrf = decodeURIComponent((document.cookie.match(/(?:^|;\\s*)csrftoken=([^;]+)/) || [])[1] || "");
  const r = await fetch(`/api/sessions/${sid}/prompt/`, {method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json"}, body: JSON.stringify({text})});
  return [r.status, await r.text()];
}"""


def test_an_operator_walks_the_console(browser, server, tmp_path):
    facts = json.loads(server.python(SETUP.format(rules=json.dumps(RULES), password=PASSWORD)).strip().splitlines()[-1])
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    base = server.base_url
    page.goto(base + "/admin/login/?next=/admin/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")

    # 1. Give the agent another model, then restrict its tools in the structured editor.
    page.goto(f"{base}/admin/runtime/agent/{facts['agent']}/change/")
    page.select_option("#id_model", label="Console model")
    page.click("input[name=_save]")
    succeeded(page)
    page.goto(base + "/admin/runtime/agent/")
    shot(page, "agents")
    page.goto(f"{base}/admin/runtime/agent/{facts['agent']}/policies/")
    page.select_option("#id_tools-bash__mode", "off")
    page.select_option("#id_tools-write__sub", "no")
    page.click("input[value='Save policies']")
    succeeded(page)
    bash_row = page.locator("tr", has=page.locator("code", has_text="bash")).first
    assert "agent_policy" in bash_row.inner_text() and "✗ off" in bash_row.inner_text()
    shot(page, "agent-policies")
    page.goto(f"{base}/admin/runtime/agent/{facts['agent']}/access/")
    shot(page, "access")
    page.goto(base + "/admin/console/access/")
    assert "everyone" in page.inner_text("#agent-access tr[data-agent='console-walk']")
    assert "superuser" in page.inner_text("#staff-roles tr[data-user='root']")
    shot(page, "access-overview")

    # 1b. Import a skill ZIP; its page shows the fingerprint and who can use it.
    archive = tmp_path / "good.zip"
    archive.write_bytes(raw_zip(good()))
    page.goto(base + "/admin/skills_registry/skillresource/import/")
    page.select_option("#id_scope", "user")
    page.set_input_files("#id_archive", str(archive))
    page.click("input[value=Import]")
    assert "Imported good" in succeeded(page)
    skill_pk = page.url.rstrip("/").split("/")[-2]
    page.goto(f"{base}/admin/console/skills/{skill_pk}/")
    facts_text = page.inner_text("#skill-facts")
    fingerprint = page.locator("#skill-facts tr", has_text="fingerprint").locator("code").inner_text()
    assert len(fingerprint) >= 16 and "good.zip" in facts_text, facts_text
    walk_row = page.locator("#who-can-use tr[data-agent='console-walk']")
    assert walk_row.count() == 1 and walk_row.inner_text().strip() != ""

    # 2. Find alice's session, inspect its tree and the context at an entry.
    page.goto(base + "/admin/sessions_tree/agentsession/")
    page.fill("#searchbar", "alice")
    page.press("#searchbar", "Enter")
    page.wait_for_selector(f"a:has-text('{facts['session']}')")
    shot(page, "sessions")
    page.click(f"a:has-text('{facts['session']}')")
    page.wait_for_selector("#session-actions")
    assert "console-walk" in page.inner_text("#session-actions")
    # The live tree: the chat page's store and tree over the session's socket, read-only.
    page.wait_for_selector("#session-live .console-live-state[data-connection=live]")
    page.wait_for_selector("#session-live .tree-row.is-leaf")
    before = page.evaluate("window.netaConsole.store.snapshot.entries.length")
    assert before >= 4 and page.locator("#session-live .tree-row").count() >= 4  # two prompts, two replies, and the title and model entries
    assert page.locator("#session-live button:has-text('Go here')").count() == 0  # no writes from the tree
    shot(page, "session")
    status, body = page.evaluate(POST_PROMPT, [facts["session"], "tell me slowly about the console"])
    assert status in (200, 201, 202), body
    # The new entries arrive without a reload: the prompt, then the streaming reply.
    page.wait_for_selector("#session-live .tree-row:has-text('tell me slowly')")
    page.wait_for_selector("#session-live .console-live-state[data-run-state=running]")
    page.wait_for_selector("#session-live .tree-row.in-flight")
    shot(page, "session-live")
    page.wait_for_selector("#session-live .console-live-state[data-run-state=completed]", timeout=30_000)
    page.wait_for_function(f"window.netaConsole.store.snapshot.entries.length === {before + 2} && !window.netaConsole.store.snapshot.inFlight")
    assert "Sentence 1 of" in page.locator("#session-live .tree-row.is-leaf").inner_text()
    # A subagent run's replay: its events in seq order, 50 a page.
    page.click(f"tr[data-subagent-run='{facts['child']}'] button:has-text('Replay')")
    page.wait_for_selector(".console-replay li[data-seq='50']")
    assert page.locator(".console-replay li").count() == 50 and "step 1" in page.locator(".console-replay li").first.inner_text()
    page.click(".console-replay button:has-text('Next 50 events')")
    page.wait_for_selector(".console-replay li[data-seq='60']")
    seqs = page.eval_on_selector_all(".console-replay li", "els => els.map((e) => Number(e.dataset.seq))")
    assert seqs == list(range(1, 61)) and page.locator(".console-replay button:has-text('Next')").count() == 0
    page.goto(f"{base}/admin/runtime/subprocessrun/?session_id={facts['session']}")
    page.wait_for_selector("#result_list")
    assert "completed" in page.inner_text("#result_list")
    shot(page, "subagent-runs")
    page.goto(f"{base}/admin/sessions_tree/agentsession/{facts['session']}/change/")
    page.click("#session-actions a:has-text('Tree')")
    page.wait_for_selector(".session-tree")
    shot(page, "session-tree")
    page.locator(".session-tree a").last.click()  # the newest entry: the whole conversation
    page.wait_for_selector("table.context-messages")
    assert "hello console" in page.inner_text("table.context-messages")
    assert page.locator("input[value='Make this entry the leaf']").count() == 1
    shot(page, "session-context")

    # 3. Reset the leaf (to before the first entry), then delete the session.
    page.goto(f"{base}/admin/sessions_tree/agentsession/{facts['session']}/change/")
    page.click("input[value='Reset the leaf']")
    assert "before the first entry" in succeeded(page)
    assert "(before the first entry)" in page.inner_text("#session-actions")
    page.click("#session-actions a.deletelink")
    page.wait_for_selector("input[value='Delete 1 session']")
    assert facts["file"] in page.content()  # the confirmation says what goes
    shot(page, "session-delete")
    page.click("input[value='Delete 1 session']")
    succeeded(page)
    after = json.loads(server.python(CHECK.format(sid=facts["session"], file=facts["file"])).strip().splitlines()[-1])
    assert after == {"session": False, "file": False, "runs": 0, "model": "console-model", "disabled": ["bash"]}

    # 4. Rotate alice's token.
    page.goto(base + "/admin/runtime/apitoken/")
    page.check(f"input[name=_selected_action][value='{facts['token']}']")
    page.select_option("select[name=action]", "rotate_tokens")
    page.click("button[name=index]")
    page.wait_for_selector("code.console-secret")
    assert page.inner_text("code.console-secret").startswith("neta_")
    shot(page, "tokens")

    # 5. The audit entry of each.
    page.goto(base + "/admin/audit/auditentry/")
    listing = page.inner_text("#result_list")
    for action in ("agent.change", "session.switch_leaf", "session.delete", "token.rotate"):
        assert action in listing, action
    walk_changes = page.locator("#result_list tbody tr", has_text="agent.change").filter(has_text="console-walk")
    assert walk_changes.count() == 2  # the model, then the tool policy
    shot(page, "audit")
    page.locator("#result_list tr", has_text="session.delete").locator("a").first.click()
    page.wait_for_selector(".field-before_json pre")
    assert facts["file"] in page.inner_text(".field-before_json")
    context.close()
    assert console.errors == [], console.errors
