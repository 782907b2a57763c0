"""The web tools in a real turn: the scripted model calls ``web_search`` and ``web_fetch``, the
turn loop runs them through the agent's projection against local servers (a SearXNG-speaking
search API and a site), and the results land in the session tree as Pi ``toolResult``s."""

from __future__ import annotations

import pytest

from runtime.agents.tools import agent_tool_projection
from runtime.models import RunStatus
from sessions_tree.providers import get_provider
from tests.support.rules import rules
from tests.support.web_servers import SearchServer, SiteServer

pytestmark = pytest.mark.django_db(transaction=True)


def tool_results(driver) -> list[dict]:
    messages = get_provider(driver.agent.session_provider).build_context(driver.session_id).messages
    return [m for m in messages if m["role"] == "toolResult"]


@pytest.fixture
def web(settings):
    with SearchServer() as search, SiteServer() as site:
        settings.NETA_WEB_SEARCH_BACKEND = "searxng"
        settings.NETA_WEB_SEARCH_URL = search.base_url
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{site.port}"]
        settings.NETA_WEB_FETCH_DENY = []
        yield search, site


def test_a_turn_searches_then_reads_a_page(driver_for, web):
    search, site = web
    script = rules(
        {
            "match": {"contains": "look it up"},
            "replies": [
                [{"tool_call": {"name": "web_search", "arguments": {"query": "tree sessions", "count": 2}}}],
                [{"tool_call": {"name": "web_fetch", "arguments": {"url": site.url("/article")}}},
                 {"tool_call": {"name": "web_fetch", "arguments": {"url": "http://169.254.169.254/latest/meta-data/"}}}],
                [{"text": "Read it."}],
            ],
        }
    )
    driver = driver_for(script)
    run = driver.prompt("look it up")
    assert run.status == RunStatus.COMPLETED, run.error
    searched, fetched, refused = tool_results(driver)
    assert searched["toolName"] == "web_search" and searched["isError"] is False
    assert searched["content"][0]["text"].startswith("1. Pi session format\n   https://example.org/pi\n")
    assert [r["url"] for r in searched["details"]["results"]] == ["https://example.org/pi", "https://example.org/trees"]
    assert fetched["toolName"] == "web_fetch" and fetched["isError"] is False
    assert "## Why branches matter" in fetched["content"][0]["text"] and "NAV-NOISE" not in fetched["content"][0]["text"]
    assert fetched["details"]["title"] == "Tree sessions explained"
    assert refused["isError"] is True and "the cloud metadata address" in refused["content"][0]["text"]
    assert len(search.hits) == 1 and [h.path for h in site.hits] == ["/article"]


def test_without_a_backend_the_turn_is_refused_web_search_with_the_projection_s_reason(driver_for, settings):
    settings.NETA_WEB_SEARCH_BACKEND = ""
    driver = driver_for(rules({"match": {"contains": "go"}, "replies": [[{"tool_call": {"name": "web_search", "arguments": {"query": "x"}}}], [{"text": "ok"}]]}))
    assert agent_tool_projection(driver.agent)["web_search"].reason == "no search backend configured"
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    (result,) = tool_results(driver)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Tool 'web_search' is not available: no search backend configured"


def test_an_agent_policy_that_disables_web_fetch_keeps_it_from_the_turn(driver_for, web):
    _search, site = web
    driver = driver_for(
        rules({"match": {"contains": "go"}, "replies": [[{"tool_call": {"name": "web_fetch", "arguments": {"url": site.url("/article")}}}], [{"text": "ok"}]]}),
        tool_policy={"disabled": ["web_fetch"]},
    )
    run = driver.prompt("go")
    assert run.status == RunStatus.COMPLETED, run.error
    (result,) = tool_results(driver)
    assert result["isError"] is True and "listed in the agent's disabled tools" in result["content"][0]["text"]
    assert site.hits == []
