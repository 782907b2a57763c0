"""A run's waterfall with a subagent child's model calls under it, in Chromium on a desktop and
a phone: the parent's calls, the delegate tool call, the child's row and its two calls
indented beneath it; and the context page of the parent's answer with the request that
produced it. Screenshots: docs/screenshots/console-trace-subagent*.png with
NETA_CONSOLE_SCREENSHOTS=1, else test-artifacts/browser/."""

from __future__ import annotations

import json
import os

from tests.support.browser import ARTIFACTS, PASSWORD, Console
from tests.support.services import REPO

SHOTS = REPO / "docs" / "screenshots" if os.environ.get("NETA_CONSOLE_SCREENSHOTS") == "1" else ARTIFACTS

PARENT = {
    "version": 1, "chunk_size": 6, "delay_ms": 15, "rules": [],
    "default": {"replies": [
        [{"text": "Let me ask a helper to look."}, {"tool_call": {"name": "delegate_task", "arguments": {"agent": "trace-helper", "task": "List the workspace and say what is there."}}}],
        [{"text": "The helper says the workspace holds notes.md and a src folder."}],
    ]},
}  # fmt: skip
CHILD = {
    "version": 1, "chunk_size": 6, "delay_ms": 15, "rules": [],
    "default": {"replies": [
        [{"text": "Listing."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}],
        [{"text": "The workspace holds notes.md and a src folder."}],
    ]},
}  # fmt: skip

RUN = f"""
import json
from django.contrib.auth import get_user_model
from runtime.models import Agent, ModelCall, ModelConfig
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
U = get_user_model()
if not U.objects.filter(username="tracer").exists():
    U.objects.create_superuser("tracer", "tracer@example.com", {PASSWORD!r})
def model(name, rules):
    return ModelConfig.objects.update_or_create(name=name, defaults=dict(provider_kind="scripted", provider_name="scripted", model_id=name,
        price_input=3, price_output=15, options={{"rules": rules}}))[0]
Agent.objects.update_or_create(name="trace-helper", defaults=dict(model=model("helper-scripted", json.loads({json.dumps(CHILD)!r}))))
boss, _ = Agent.objects.update_or_create(name="trace-boss", defaults=dict(model=model("boss-scripted", json.loads({json.dumps(PARENT)!r})),
    subagent_policy={{"enabled": True, "agents": ["trace-helper"]}}))
session = session_start(agent=boss).session_id
outcome = session_prompt(actor=None, session_id=session, text="What is in the workspace?", dispatch=False)
run = execute_run(outcome.run.run_id)
answer = ModelCall.objects.filter(run=run, subprocess_run__isnull=True).order_by("-started_at").first()
print(json.dumps({{"run": run.pk, "status": run.status, "session": session, "answer": answer.entry_id,
                  "child_calls": ModelCall.objects.filter(run=run, subprocess_run__isnull=False).count()}}))
"""


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"console-{name}.png"), full_page=False)


def test_the_waterfall_shows_a_childs_calls_under_it_on_a_desktop_and_a_phone(browser, server):
    facts = json.loads(server.python(RUN).strip().splitlines()[-1])
    assert facts["status"] == "completed" and facts["child_calls"] == 2, facts
    for name, viewport in (("trace-subagent", {"width": 1440, "height": 900}), ("trace-subagent-phone", {"width": 390, "height": 844})):
        context = browser.new_context(viewport=viewport, device_scale_factor=2 if "phone" in name else 1)
        page = context.new_page()
        page.set_default_timeout(20_000)
        console = Console(page)
        page.goto(server.base_url + f"/admin/runtime/agentrun/{facts['run']}/change/")
        page.fill("#id_username", "tracer")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        table = page.locator("table.trace-waterfall")
        table.wait_for()
        kinds = page.eval_on_selector_all("table.trace-waterfall tbody tr", "rows => rows.map((r) => [r.dataset.kind, r.cells[0].dataset.depth])")
        # The parent's two calls and its tool call, then the child and its two calls one step in.
        assert kinds == [["model_call", "0"], ["model_call", "0"], ["tool_call", "0"], ["subagent", "0"], ["model_call", "1"], ["model_call", "1"]], kinds
        child_rows = page.locator("table.trace-waterfall tbody tr:has(td[data-depth='1'])")
        assert "helper-scripted" in child_rows.first.inner_text() and "first token" in child_rows.first.inner_text()
        child_rows.last.locator("details.trace-request summary").click()
        assert "lived in its process" in child_rows.last.inner_text()
        child_rows.last.locator("details.trace-request summary").click()  # closed again for the picture
        # The waterfall from its first column (opening a request scrolled its box sideways) and its header row.
        page.evaluate("(() => { const t = document.querySelector('table.trace-waterfall'); t.parentElement.scrollLeft = 0; t.scrollIntoView({block: 'start'}); window.scrollBy(0, -40); })()")
        shot(page, name)
        assert console.errors == []
        if "phone" not in name:
            # The parent's answer: the context page opens with the request that produced it.
            page.goto(server.base_url + f"/admin/sessions_tree/agentsession/{facts['session']}/context/?at={facts['answer']}")
            page.wait_for_selector(".recorded-request")
            text = page.inner_text(".recorded-request")
            assert "The recorded request that produced this entry" in text and "boss-scripted" in text and "3 messages sent" in text  # the question, the call and its result
            shot(page, "context-recorded-request")
        context.close()
