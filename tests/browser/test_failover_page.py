"""A model failover as the chat page shows it, in Chromium against the real Daphne: the
agent's primary refuses connections, its fallback (the OpenAI SDK against a local wire
server run by this test) answers, and the status bar says "answered by … after … failed".
(After a reload only a run still going brings its notes back, as with its state: an old run's
notes stay in its record.) Screenshots at desktop and phone width (test-artifacts/browser/)."""

from __future__ import annotations

import socket

import pytest
from playwright.sync_api import expect

from tests.support.browser import Console, login, send, wait_idle
from tests.support.wire_servers import Reply, WireServer

pytestmark = pytest.mark.slow

SETUP = """
from runtime.models import Agent, ModelConfig
primary, _ = ModelConfig.objects.update_or_create(name="fo-primary", defaults=dict(
    provider_kind="anthropic", model_id="claude-down", base_url="{primary}", api_key_env="FAILOVER_TEST_API_KEY",
    options={{"max_retries": 0, "timeout": 5}}, enabled=True,
))
ModelConfig.objects.update_or_create(name="fo-backup", defaults=dict(
    provider_kind="openai", model_id="gpt-up", base_url="{backup}", api_key_env="BACKUP_TEST_API_KEY",
    options={{"max_retries": 0, "timeout": 10}}, enabled=True,
))
Agent.objects.update_or_create(name="failover", defaults=dict(
    model=primary, fallback_models=["fo-backup"], workspace_mode="shared", restore_last_session=False, description="failover page",
))
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("viewport", [{"width": 1440, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"])
def test_the_status_bar_says_which_model_answered(browser, server, artifacts, viewport):
    with WireServer("openai") as backup:
        server.python(SETUP.format(primary=f"http://127.0.0.1:{closed_port()}", backup=backup.base_url))
        answer = "The backup model answers: **all good**."
        backup.script(Reply(content=[{"type": "text", "text": answer}]), Reply(content=[{"type": "text", "text": "Backup greeting"}]))
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.set_default_timeout(30_000)
        console = Console(page)
        login(page, server.base_url, path="/?agent=failover")
        send(page, "hello there")
        expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("The backup model answers", timeout=60_000)
        wait_idle(page)
        note = page.locator(".run-note")
        expect(note).to_have_attribute("data-kind", "failover")
        expect(note).to_contain_text("answered by fo-backup after fo-primary failed: Connection error")
        expect(page.locator(".run-state")).to_have_attribute("data-state", "completed")
        name = "failover-" + ("desktop" if viewport["width"] > 800 else "phone")
        page.screenshot(path=str(artifacts / f"{name}.png"))
        box = note.bounding_box()
        assert box is not None and box["x"] + box["width"] <= viewport["width"] + 1, box  # inside the page, not off its edge
        assert backup.requests[0].body["model"] == "gpt-up"
        context.close()
        assert console.errors == [], console.errors
