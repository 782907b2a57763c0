"""The web tools for subagents, end to end through the host: a child agent whose tool policy
allows network gets ``web_fetch`` worker-local (it runs in the child process) and
``web_search`` as a main-process proxy (the backend's key stays with the host); a child
without network gets neither, and says why."""

from __future__ import annotations

import pytest

from runtime.models import RunStatus, SubprocessEvent, SubprocessRun
from tests.subagents.host_helpers import Parent, delegating, make_agent, policy, script
from tests.support.web_servers import SearchServer, SiteServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def web(workspace, settings):
    path = workspace
    with SearchServer() as search, SiteServer() as site:
        settings.NETA_WEB_SEARCH_BACKEND = "searxng"
        settings.NETA_WEB_SEARCH_URL = search.base_url
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{site.port}"]
        settings.NETA_WEB_FETCH_DENY = []
        yield path, search, site


def child_script(site) -> dict:
    calls = [
        {"tool_call": {"name": "web_search", "arguments": {"query": "tree sessions", "count": 1}}},
        {"tool_call": {"name": "web_fetch", "arguments": {"url": site.url("/notes.txt")}}},
    ]
    return script(default={"replies": [calls, [{"text": "looked it up"}]]})


def run_child(workspace, site, *, network: bool):
    make_agent("helper", child_script(site), workspace=workspace, tool_policy={"network": network})
    boss = make_agent("boss", delegating("delegate_task", {"agent": "helper", "task": "look it up"}), workspace=workspace,
                      subagent_policy=policy("helper"))
    parent = Parent(boss)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    return SubprocessRun.objects.get(parent_run=run)


def test_a_child_with_network_searches_through_the_host_and_fetches_itself(web):
    workspace, search, site = web
    row = run_child(workspace, site, network=True)
    assert row.status == "completed", row.error
    routes = {t["name"]: t["route"] for t in row.envelope["toolPolicy"]["tools"]}
    assert routes["web_fetch"] == "worker-local" and routes["web_search"] == "main-process-proxy"
    assert row.envelope["runtimeConfig"]["sandbox"]["toolSettings"]["NETA_WEB_FETCH_ALLOW"] == [f"127.0.0.1:{site.port}"]
    results = [e.payload for e in SubprocessEvent.objects.filter(run=row, type="tool_result").order_by("seq")]
    previews = [r["preview"] for r in results]
    assert any(p.startswith("1. Pi session format") for p in previews), previews
    assert any("line one of the plain text" in p for p in previews), previews
    assert not any(r["isError"] for r in results)
    proxied = [e.payload["name"] for e in SubprocessEvent.objects.filter(run=row, type="proxy_request")]
    assert proxied == ["web_search"]  # web_fetch ran in the child itself
    assert len(search.hits) == 1 and [h.path for h in site.hits] == ["/notes.txt"]


def test_a_child_without_network_gets_no_web_tool(web):
    workspace, search, site = web
    row = run_child(workspace, site, network=False)
    granted = {t["name"] for t in row.envelope["toolPolicy"]["tools"]}
    assert not granted & {"web_search", "web_fetch"}
    results = list(SubprocessEvent.objects.filter(run=row, type="tool_result").order_by("seq"))
    assert results and all(e.payload["isError"] for e in results)
    assert search.hits == [] and site.hits == []
