"""The web tools' cards on the chat page, in a real browser against a Daphne whose settings
select a (local, SearXNG-speaking) search backend and allow a local site: the search card lists
the results as links (http(s) only), the fetch card links the page and shows its markdown, and
a refused fetch is an error card that says why."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, SETUP, Console, Server, login, send, server_env, start_daphne, stop_daphne, wait_idle
from tests.support.databases import sqlite_migrated
from tests.toolcatalog.web_servers import SearchServer, SiteServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def web_server(tmp_path_factory):
    from tests.browser.conftest import require_browser

    require_browser()
    with SearchServer() as search, SiteServer() as site:
        var_dir = tmp_path_factory.mktemp("neta-browser-web")
        (var_dir / "workspace").mkdir(parents=True)
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
        env = server_env(
            var_dir,
            NETA_WEB_SEARCH_BACKEND="searxng",
            NETA_WEB_SEARCH_URL=search.base_url,
            NETA_WEB_FETCH_ALLOW=f"127.0.0.1:{site.port}",
        )
        server = Server(base_url="", env=env, var_dir=var_dir)
        sqlite_migrated(var_dir / "neta.sqlite3", bootstrapped=True)
        server.python(SETUP.format(rules=json.dumps(rules), password=PASSWORD))
        proc, server.base_url = start_daphne(env, var_dir / "daphne.log")
        try:
            yield server, search, site
        finally:
            stop_daphne(proc)


def test_search_and_fetch_cards(browser, web_server, artifacts):
    server, search, site = web_server
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(30_000)
    console = Console(page)
    login(page, server.base_url)
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
