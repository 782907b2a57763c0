"""``web_search`` through the real tool against a local server speaking SearXNG's, Brave's and
Tavily's JSON APIs; its place in the projection (absent with the reason when no backend is
configured; network-gated for subagents); and the system checks for the web settings."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.web_servers import SearchServer
from toolcatalog import checks
from toolcatalog.policy import PolicyError
from toolcatalog.projection import GovernanceRule, resolve_tools


KEY = "sk-search-canary-9f1e"


@pytest.fixture
def engine(settings, monkeypatch):
    with SearchServer(key=KEY) as server:
        monkeypatch.setenv("WEBTEST_SEARCH_KEY", KEY)
        settings.NETA_WEB_SEARCH_URL = server.base_url
        settings.NETA_WEB_SEARCH_KEY_ENV = "WEBTEST_SEARCH_KEY"
        settings.NETA_WEB_FETCH_ALLOW = []  # the backend's own host:port is allowed by being the backend
        settings.NETA_WEB_FETCH_DENY = []
        yield server


def query_of(hit) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(hit.path).query).items()}


EXPECTED_LIST = (
    "1. Pi session format\n   https://example.org/pi\n   How Pi stores sessions as JSONL trees.\n   (2026-11-30)\n\n"
    "2. Tree-shaped sessions\n   https://example.org/trees\n   Branches, leaves and summaries.\n\n"
    "3. Compaction in agents\n   https://example.com/compaction\n   Keeping context windows small."
)


def test_searxng(call, engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    result = call("web_search", query="tree sessions", count=3, site="example.org", recency="week")
    assert not result.is_error, result.text_output()
    assert result.text_output() == EXPECTED_LIST
    (hit,) = engine.hits
    assert hit.method == "GET" and urlsplit(hit.path).path == "/search"
    assert query_of(hit) == {"q": "tree sessions site:example.org", "format": "json", "pageno": "1", "time_range": "week"}
    assert hit.headers["user-agent"].startswith("Neta-WebFetch/")
    assert result.details == {
        "backend": "searxng", "query": "tree sessions", "site": "example.org", "recency": "week",
        "results": [
            {"title": "Pi session format", "url": "https://example.org/pi", "snippet": "How Pi stores sessions as JSONL trees.", "published": "2026-11-30"},
            {"title": "Tree-shaped sessions", "url": "https://example.org/trees", "snippet": "Branches, leaves and summaries."},
            {"title": "Compaction in agents", "url": "https://example.com/compaction", "snippet": "Keeping context windows small."},
        ],
    }


def test_brave(call, engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "brave"
    result = call("web_search", query="tree sessions", count=3, recency="day")
    assert not result.is_error, result.text_output()
    assert result.text_output() == EXPECTED_LIST
    (hit,) = engine.hits
    assert urlsplit(hit.path).path == "/res/v1/web/search"
    assert query_of(hit) == {"q": "tree sessions", "count": "3", "freshness": "pd"}
    assert hit.headers["x-subscription-token"] == KEY and hit.headers["accept"] == "application/json"
    assert result.details["backend"] == "brave" and len(result.details["results"]) == 3


def test_tavily(call, engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "tavily"
    result = call("web_search", query="tree sessions", count=3, site="example.org", recency="month")
    assert not result.is_error, result.text_output()
    assert result.text_output() == EXPECTED_LIST
    (hit,) = engine.hits
    assert hit.method == "POST" and urlsplit(hit.path).path == "/search"
    assert hit.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(hit.body) == {"query": "tree sessions", "max_results": 3, "search_depth": "basic",
                                    "include_domains": ["example.org"], "time_range": "month"}


def test_the_default_count_is_five(call, engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    result = call("web_search", query="anything")
    assert [r["url"] for r in result.details["results"]] == [
        "https://example.org/pi", "https://example.org/trees", "https://example.com/compaction",
        "https://example.net/subagents", "https://example.net/ssrf",
    ]


def test_no_results_is_said_plainly(call, engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "brave"
    engine.results = []
    result = call("web_search", query="nothing at all")
    assert not result.is_error and result.text_output() == "No results for 'nothing at all'."
    assert result.details["results"] == []


@pytest.mark.parametrize("backend", ["brave", "tavily"])
def test_a_rejected_key_is_an_error_that_never_shows_the_key(call, engine, settings, monkeypatch, backend):
    settings.NETA_WEB_SEARCH_BACKEND = backend
    monkeypatch.setenv("WEBTEST_SEARCH_KEY", "sk-wrong-key-4242")
    result = call("web_search", query="x")
    assert result.is_error and f"Search failed: the {backend} backend answered HTTP 401" in result.text_output()
    assert "sk-wrong-key-4242" not in result.text_output() and "sk-wrong-key-4242" not in json.dumps(result.details)


@pytest.mark.parametrize("backend", ["searxng", "brave", "tavily"])
def test_a_failing_backend_is_an_error_result(call, engine, settings, backend):
    settings.NETA_WEB_SEARCH_BACKEND = backend
    engine.status = 502
    result = call("web_search", query="x")
    assert result.is_error and f"the {backend} backend answered HTTP 502" in result.text_output()


def test_the_backend_s_address_is_allowed_but_nothing_else_on_that_host(call, engine, settings):
    """The operator's backend may be on a private address; that does not open its host to web_fetch."""
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    assert not call("web_search", query="x").is_error
    fetched = call("web_fetch", url=f"{engine.base_url}/search?q=x&format=json")
    assert fetched.is_error and fetched.text_output().startswith("Refused to fetch")
    assert len(engine.hits) == 1


# --------------------------------------------------------------------------- projection


def test_without_a_backend_web_search_is_absent_with_the_reason(settings):
    settings.NETA_WEB_SEARCH_BACKEND = ""
    projection = resolve_tools({}, governance={})
    decision = projection["web_search"]
    assert not decision.effective and decision.reason == "no search backend configured" and decision.source == "configuration"
    assert "web_search" not in [d["name"] for d in projection.tool_definitions()]
    # Even an agent that enables it explicitly does not get it.
    assert resolve_tools({"enabled": ["web_search"]}, governance={})["web_search"].reason == "no search backend configured"
    assert projection["web_fetch"].effective


def test_a_misconfigured_backend_is_absent_with_what_is_wrong(settings, monkeypatch):
    settings.NETA_WEB_SEARCH_BACKEND = "brave"
    settings.NETA_WEB_SEARCH_KEY_ENV = ""
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    decision = resolve_tools({}, governance={})["web_search"]
    assert not decision.effective
    assert decision.reason == "the search backend is misconfigured: the brave backend reads its key from $BRAVE_API_KEY, which is not set"
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    settings.NETA_WEB_SEARCH_URL = ""
    assert "needs NETA_WEB_SEARCH_URL" in resolve_tools({}, governance={})["web_search"].reason


def test_with_a_backend_both_tools_are_core_tools_the_policy_governs(engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    projection = resolve_tools({}, governance={})
    assert projection["web_search"].effective and projection["web_fetch"].effective
    assert projection["web_search"].kind == "builtin" and projection["web_fetch"].manifest["requires_network"] is True
    off = resolve_tools({"disabled": ["web_search", "web_fetch"]}, governance={})
    assert not off["web_search"].effective and off["web_search"].reason == "listed in the agent's disabled tools"
    staff = resolve_tools({}, governance={"web_fetch": GovernanceRule(enabled=False)})
    assert staff["web_fetch"].reason == "disabled by staff governance (ToolConfig)"
    assert not resolve_tools({"inherit_core_tools": False}, governance={})["web_fetch"].effective


def test_subagents_get_network_tools_only_where_the_policy_allows_network(engine, settings):
    settings.NETA_WEB_SEARCH_BACKEND = "searxng"
    closed = resolve_tools({}, for_subagent=True, governance={})
    for name in ("web_search", "web_fetch"):
        assert not closed[name].effective
        assert closed[name].reason == "reaches the network, and the agent's tool policy does not allow network (network: false)"
    assert closed["read"].effective
    opened = resolve_tools({"network": True}, for_subagent=True, governance={})
    assert opened["web_fetch"].effective and opened["web_fetch"].route == "worker-local"
    # The search key stays in the main process: subagents ask it to search.
    assert opened["web_search"].effective and opened["web_search"].route == "main-process-proxy"
    denied = resolve_tools({"network": True, "per_tool": {"web_fetch": {"allow_in_subagent": False}}}, for_subagent=True, governance={})
    assert not denied["web_fetch"].effective
    with pytest.raises(PolicyError, match="web_search"):  # its key stays in the main process
        resolve_tools({"network": True, "per_tool": {"web_search": {"worker_routing": "worker-local"}}}, for_subagent=True, governance={})


# --------------------------------------------------------------------------- system checks


def test_checks_warn_about_a_misconfigured_backend_and_fail_on_bad_list_entries(settings, monkeypatch):
    settings.NETA_WEB_SEARCH_BACKEND = ""
    settings.NETA_WEB_FETCH_ALLOW = []
    settings.NETA_WEB_FETCH_DENY = []
    assert checks.check_web_tools() == []
    settings.NETA_WEB_SEARCH_BACKEND = "tavily"
    settings.NETA_WEB_SEARCH_KEY_ENV = "WEBTEST_NO_SUCH_KEY"
    monkeypatch.delenv("WEBTEST_NO_SUCH_KEY", raising=False)
    (warning,) = checks.check_web_tools()
    assert warning.id == "toolcatalog.W003" and "$WEBTEST_NO_SUCH_KEY, which is not set" in warning.msg
    monkeypatch.setenv("WEBTEST_NO_SUCH_KEY", "k")
    assert checks.check_web_tools() == []
    settings.NETA_WEB_FETCH_DENY = ["10.0.0.0/40"]
    (error,) = checks.check_web_tools()
    assert error.id == "toolcatalog.E002" and "NETA_WEB_FETCH_DENY" in error.msg
