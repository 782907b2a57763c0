"""Browser tests: one Chromium per xdist worker against the shared browser deployment
(``tests/support/browser.py``). Every browser test is in one xdist group, so a run starts
one deployment and one Chromium for all of them."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.browser import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, Console, Site, browser_deployment as build, login, require_browser


@pytest.fixture(scope="session")
def browser_deployment(tmp_path_factory):
    require_browser()
    deployment = build(tmp_path_factory.mktemp("neta-browser"))
    deployment.prepare()
    yield deployment
    deployment.close()


@pytest.fixture(scope="session")
def server(browser_deployment) -> Site:
    """The deployment's main server."""
    return Site(browser_deployment).start()


@pytest.fixture(scope="session")
def chromium():
    """Chromium and Playwright's loop, once per worker; the loop is not left marked running."""
    require_browser()
    from playwright.sync_api import sync_playwright

    manager = sync_playwright()
    playwright = manager.start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
    except BaseException:
        manager.__exit__()
        raise
    loop = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    yield chromium, loop
    asyncio._set_running_loop(loop)
    try:
        chromium.close()
    finally:
        manager.__exit__()
        asyncio._set_running_loop(None)


@pytest.fixture
def browser(chromium, browser_deployment):
    """The worker's Chromium, for one test: Playwright's loop is this thread's running loop
    while the test runs (as Playwright's sync API expects), and none after it."""
    chromium, loop = chromium
    asyncio._set_running_loop(loop)
    yield chromium
    asyncio._set_running_loop(None)


@pytest.fixture
def artifacts():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def chat(browser, server, artifacts, request):
    """A logged-in page on a fresh session of the `browser` agent (desktop width)."""
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url)
    page.console = console
    yield page
    page.screenshot(path=str(artifacts / f"{request.node.name}-end.png"))
    context.close()
    assert console.errors == [], console.errors
