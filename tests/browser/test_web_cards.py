"""The web tools' cards on the chat page, in a real browser against a Daphne (of the browser
deployment) whose settings
select a (local, SearXNG-speaking) search backend and allow a local site: the search card lists
the results as links (http(s) only), the fetch card links the page and shows its markdown, and
a refused fetch is an error card that says why."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.support.browser import Console, Site, login, send, wait_idle
from tests.support.web_servers import SearchServer, SiteServer

pytestmark = pytest.mark.slow


AGENT = """
import json
from runtime.models import Agent, ModelConfig
model = ModelConfig.objects.create(
    name="web-cards-scripted", display_name="Web cards", provider_kind="scripted", provider_name="scripted",
    model_id="web-cards-scripted", context_window=64000, max_output_tokens=4096, price_input=1, price_output=2,
    options={{"rules": json.loads({rules!r})}},
)
Agent.objects.create(name="web-cards", model=model, workspace_mode="shared", restore_last_session=False, description="web cards")
"""


@pytest.fixture(scope="module")
def web_server(browser_deployment):
    """A server of its own on the browser deployment whose settings name the local search
    backend and allow the local site; an agent of its own whose model looks things up there."""
    with SearchServer() as search, SiteServer() as site:
        rules = {
            "version": 1,
            "chunk_size": 0,
            "rules": [
                {
                    "match": {"contains": "look it up"},
                    "replies": [
                        [{"tool_call": {"name": "web_search", "arguments": {"query": "tree sessions", "count": 3, "recency": "week"}}}],
                        [{"tool_call": {"name": "web_fetch", "arguments": {"url": site.url("/article")}}},
                         {"tool_call": {"name": "web_fetch", "arguments": {"url": "http://169.254.169.254/latest/meta-data/"}}}],
                        [{"text": "Found and read it."}],
                    ],
                }
            ],
            "default": {"reply": [{"text": "Noted: {{user}}"}]},
        }
        server = Site(browser_deployment, "web-tools").start(
            NETA_WEB_SEARCH_BACKEND="searxng", NETA_WEB_SEARCH_URL=search.base_url, NETA_WEB_FETCH_ALLOW=f"127.0.0.1:{site.port}",
        )  # fmt: skip
        server.python(AGENT.format(rules=json.dumps(rules)))
        try:
            yield server, search, site
        finally:
            browser_deployment.kill("web-tools")  # its settings name servers that stop with this module


def test_search_and_fetch_cards(browser, web_server, artifacts):
    server, search, site = web_server
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(30_000)
    console = Console(page)
    login(page, server.base_url, path="/?agent=web-cards")
    send(page, "look it up")
    wait_idle(page, timeout=60_000)
    expect(page.locator(".stable-list .msg-assistant").last).to_contain_text("Found and read it.")

    page.locator(".stable-list .msg-assistant").last.locator("details.steps > summary").click()  # the calls are the answer's steps
    card = page.locator(".stable-list .tool-card[data-tool=web_search]")
    expect(card.locator(".tool-summary")).to_have_text("tree sessions · past week")
    expect(card.locator(".tool-status")).to_have_text("✓")
    card.locator("summary").click()
    links = card.locator(".web-results li a")
    expect(links).to_have_count(3)
    expect(links.first).to_have_text("Pi session format")
    expect(links.first).to_have_attribute("href", "https://example.org/pi")
    expect(links.first).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(card.locator(".web-result-snippet").first).to_have_text("How Pi stores sessions as JSONL trees.")

    fetched, refused = page.locator(".stable-list .tool-card[data-tool=web_fetch]").all()
    expect(fetched.locator(".tool-summary")).to_have_text(site.url("/article"))
    fetched.locator("summary").click()
    expect(fetched.locator(".tool-note a")).to_have_attribute("href", site.url("/article"))
    expect(fetched.locator(".tool-output")).to_contain_text("## Why branches matter")
    expect(refused.locator(".tool-status")).to_have_text("✗ error")
    expect(refused.locator(".tool-output")).to_contain_text("the cloud metadata address")
    expect(refused.locator("a")).to_have_count(0)  # no link to a refused address
    card.screenshot(path=str(artifacts / "web-search-card.png"))
    page.screenshot(path=str(artifacts / "web-cards.png"), full_page=True)
    assert len(search.hits) == 1 and [h.path for h in site.hits] == ["/article"]
    assert console.errors == [], console.errors
    context.close()
