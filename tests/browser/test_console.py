"""The staff console in Chromium, as an operator walks it: the overview's health, a new model
with a key variable and its connection test, a new agent on that model with its tools
restricted, why a tool is gone for subagents, a skill's history, a failing run and its error,
and the audit entry of each write. Screenshots at 1440×900: docs/screenshots/console-*.png with
NETA_CONSOLE_SCREENSHOTS=1, else test-artifacts/browser/."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, Console
from tests.support.services import REPO
from tests.support.wire_servers import Reply, WireServer

# The docs' screenshots are refreshed on request (NETA_CONSOLE_SCREENSHOTS=1), else they go with the test artifacts.
SHOTS = REPO / "docs" / "screenshots" if os.environ.get("NETA_CONSOLE_SCREENSHOTS") == "1" else ARTIFACTS

STAFF = f"""
from django.contrib.auth import get_user_model
from runtime.models import Agent, AgentRun
U = get_user_model()
if not U.objects.filter(username="operator").exists():
    U.objects.create_superuser("operator", "op@example.com", {PASSWORD!r})
agent = Agent.objects.get(name="browser")
alice = U.objects.get(username="alice")
AgentRun.objects.create(session_id="console-failing-session", agent=agent, user=alice, status="failed",
    error="model call failed: 529 overloaded_error (Overloaded) after 3 retries")
AgentRun.objects.create(session_id="console-fine-session", agent=agent, user=alice, status="completed", input_tokens=1200, output_tokens=300, cost=0.0042)
"""


def skill_zip(body: str) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("release-notes/SKILL.md", f"---\nname: release-notes\ndescription: Write release notes from a changelog.\n---\n{body}\n")
    return data.getvalue()


@pytest.fixture(scope="module")
def wire():
    with WireServer("openai") as server:
        yield server


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"console-{name}.png"), full_page=False)


# The walk closes bash to subagents in the deployment the worker's other browser tests share.
BASH_BACK = """
from toolcatalog.services import tool_config_update
tool_config_update(actor=None, name="bash", allow_in_subagent=True)
"""


@pytest.fixture
def bash_back_for_subagents(server):
    yield
    server.python(BASH_BACK)


def test_an_operator_walks_the_console(browser, server, wire, tmp_path, bash_back_for_subagents):
    server.python(STAFF)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    page.goto(server.base_url + "/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    # 1. The overview is the console's home: health first, every part named.
    page.wait_for_selector("#health")
    for part in ("database", "channel-layer", "celery-workers", "sandbox", "reaper"):
        assert page.locator(f'#health tr[data-check="{part}"]').count() == 1
    assert page.locator('#health tr[data-check="database"] .pill-ok').count() == 1
    assert "529 overloaded_error" in page.inner_text("#failing-runs")
    shot(page, "overview")

    # 2. A model with a key variable, then its connection test through the real client.
    page.goto(server.base_url + "/admin/runtime/modelconfig/add/")
    page.fill("#id_name", "wire-model")
    page.select_option("#id_provider_kind", "openai-compatible")
    page.fill("#id_model_id", "wire-test")
    page.fill("#id_base_url", wire.base_url)
    page.fill("#id_api_key_env", "CONSOLE_TEST_API_KEY")
    page.fill("#id_options", json.dumps({"max_retries": "lots"}))
    page.click("input[name=_continue]")
    assert "max_retries must be a whole number" in page.inner_text(".field-options")  # refused, with the reason
    page.fill("#id_options", json.dumps({"max_retries": 1}))
    page.click("input[name=_continue]")
    page.wait_for_selector("#test-connection")
    assert "CONSOLE_TEST_API_KEY is set" in page.inner_text(".field-key_status")
    assert "sk-browser-console" not in page.content()
    wire.script(Reply(content=[{"type": "text", "text": "Hello from the wire server."}]))
    page.click("#test-connection")
    page.wait_for_selector('#connection-test[data-ok="true"]')
    assert "Hello from the wire server." in page.inner_text("#connection-test")
    assert wire.requests[-1].headers.get("authorization") == "Bearer sk-browser-console"
    shot(page, "model")
    page.goto(server.base_url + "/admin/runtime/modelconfig/")
    assert "CONSOLE_TEST_API_KEY is set" in page.inner_text('#result_list tr:has-text("wire-model")')
    shot(page, "models")

    # 2b. A new agent on that model, its tools restricted in the structured editor.
    page.goto(server.base_url + "/admin/runtime/agent/add/")
    page.fill("#id_name", "wire-agent")
    page.select_option("#id_model", label="wire-model")
    page.fill("#id_cwd", str(server.var_dir / "wire-agent"))
    page.click("input[name=_continue]")
    page.wait_for_selector(".field-policy_editor a")
    shot(page, "agent")
    page.click(".field-policy_editor a")
    page.select_option("#id_tools-bash__mode", "off")
    page.click("input[value='Save policies']")
    page.wait_for_selector(".messagelist .success")
    assert "wire-model" in page.inner_text("#content")
    bash_row = page.locator("tr", has=page.locator("code", has_text="bash")).first
    assert "✗ off" in bash_row.inner_text() and "agent_policy" in bash_row.inner_text()

    # 3. Tools: close bash to subagents, and see why the browser agent's children lack it.
    page.goto(server.base_url + "/admin/console/tools/")
    page.wait_for_selector('#tool-list tr[data-tool="bash"]')
    shot(page, "tools")
    page.click('#tool-list tr[data-tool="bash"] a')
    page.uncheck("#id_allow_in_subagent")
    page.click("#governance input[type=submit]")
    page.wait_for_selector("#who-gets-it")
    row = page.locator('#who-gets-it tr[data-agent="browser"]')
    assert row.locator(".decision-main").inner_text().startswith("✓")
    sub = row.locator(".decision-sub").inner_text()
    assert sub.startswith("✗") and "subagent" in sub
    shot(page, "tool")

    # 4. A skill imported twice: its versions and the SKILL.md diff between them.
    for body, replace in (("Group changes by area.", False), ("Group changes by area, newest first.", True)):
        archive = tmp_path / "release-notes.zip"
        archive.write_bytes(skill_zip(body))
        page.goto(server.base_url + "/admin/skills_registry/skillresource/import/")
        page.set_input_files("#id_archive", str(archive))
        if replace:
            page.check("#id_replace")
            shot(page, "skill-import")
        page.click("input[type=submit]")
        page.wait_for_selector(".messagelist")
    page.goto(server.base_url + "/admin/skills_registry/skillresource/")
    page.wait_for_selector("#result_list")
    shot(page, "skills")
    page.goto(server.base_url + "/admin/skills_registry/skillresource/?q=release-notes")
    page.click("td.field-console_page a")
    page.wait_for_selector("#history")
    assert page.locator("#history tr[data-revision]").count() == 2
    assert "+Group changes by area, newest first." in page.inner_text(".skill-diff")
    assert "browser" in page.inner_text("#who-can-use")
    shot(page, "skill")

    # 5. The failing run: found by its user and status, its error on the row.
    page.goto(server.base_url + "/admin/runtime/agentrun/?q=alice&status__exact=failed")
    page.wait_for_selector("#result_list")
    assert "529 overloaded_error" in page.inner_text("#result_list td.field-error_head")
    shot(page, "runs")
    page.click("#result_list th.field-run_id_short a")  # the run's own page: its whole error
    page.wait_for_selector(".field-error")
    assert "after 3 retries" in page.inner_text(".field-error") and "failed" in page.inner_text(".field-status")
    assert page.get_attribute(".field-session_page a", "href").endswith("/agentsession/console-failing-session/change/")
    shot(page, "run")

    # 6. The audit entry of each write of the walk, with its values.
    page.goto(server.base_url + "/admin/audit/auditentry/?via__exact=console")
    listing = page.inner_text("#result_list")
    for action in ("model.create", "agent.create", "agent.change", "tool.change", "skill.import"):
        assert action in listing, action
    for action, target, shown in (
        ("model.create", "wire-model", "CONSOLE_TEST_API_KEY"),
        ("agent.change", "wire-agent", '"bash"'),
        ("tool.change", "bash", "allow_in_subagent"),
        ("skill.import", "release-notes", "fingerprint"),
    ):
        page.goto(server.base_url + f"/admin/audit/auditentry/?action__exact={action}&q={target}")
        page.locator("#result_list tbody tr").first.locator("a").first.click()
        page.wait_for_selector(".field-after_json pre")
        assert shown in page.inner_text(".field-after_json") + page.inner_text(".field-changes"), action
        assert "operator" in page.inner_text(".field-actor_name"), action
        if action == "tool.change":
            assert "false" in page.inner_text(".field-changes")  # allow_in_subagent: true → false
            shot(page, "audit-entry")
    context.close()
    assert console.errors == [], console.errors
