"""Benchmarks for the web tools: what the guard and the extraction cost per call.

Run: ``.venv/bin/python -m bench.web_tools`` (from the repository root). Prints figures,
never asserts. A local site (``tests/support/web_servers.py``) serves the pages over
real sockets; 127.0.0.1 is allowed for the run. Measured here:

* the guard's URL check alone (parse, resolve an IP literal, classify): median per call;
* a refusal (a loopback URL, not allowed): median per call — what a hostile URL costs;
* ``web_fetch`` of plain text, the article page (trafilatura) and the two-page PDF (pypdf):
  median per call, and the ratio article / text (the extraction's share);
* ``web_search`` against the local SearXNG-speaking server: median per call.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
django.setup()

from django.conf import settings  # noqa: E402

from tests.support.web_servers import SearchServer, SiteServer  # noqa: E402
from toolcatalog import web_guard  # noqa: E402
from toolcatalog.protocol import ToolContext, get_tool, run_tool  # noqa: E402


def median_ms(fn, n: int) -> float:
    fn()  # warm (imports, trust store, first extraction)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    with SiteServer() as site, SearchServer() as search, tempfile.TemporaryDirectory() as root:
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{site.port}"]
        settings.NETA_WEB_SEARCH_BACKEND = "searxng"
        settings.NETA_WEB_SEARCH_URL = search.base_url
        ctx = ToolContext(roots=(root,), sandbox="none", output_dir=None)
        policy = web_guard.policy_from_settings()

        def refused() -> None:
            try:
                web_guard.check_url(f"http://0x7f.1:{site.port}/", policy)
            except web_guard.WebRefused:
                return
            raise SystemExit("the loopback URL was not refused")

        print(f"guard check (allowed IP literal): median {median_ms(lambda: web_guard.check_url(site.url('/article'), policy), 500) * 1000:.0f} µs")
        print(f"guard refusal (0x7f.1, loopback): median {median_ms(refused, 500) * 1000:.0f} µs")

        def fetch(path: str):
            return lambda: run_tool(get_tool("web_fetch"), ctx, {"url": site.url(path)})

        text = median_ms(fetch("/notes.txt"), 50)
        article = median_ms(fetch("/article"), 50)
        pdf = median_ms(fetch("/doc.pdf"), 50)
        print(f"web_fetch text: median {text:.1f} ms; article (trafilatura): {article:.1f} ms "
              f"({article / text:.1f}x text); PDF, 2 pages (pypdf): {pdf:.1f} ms")
        searched = median_ms(lambda: run_tool(get_tool("web_search"), ctx, {"query": "tree sessions"}), 50)
        print(f"web_search (local SearXNG JSON): median {searched:.1f} ms")


if __name__ == "__main__":
    main()
