"""The search engines behind ``web_search``, each through its documented HTTP API.

Chosen by ``NETA_WEB_SEARCH_BACKEND``:

* ``searxng`` — a SearXNG instance (self-hosted): ``GET {NETA_WEB_SEARCH_URL}/search?q=…&format=json``
  (the instance must have ``json`` in ``search.formats``), ``time_range`` for recency;
* ``brave`` — Brave Search API: ``GET {base}/res/v1/web/search?q=…&count=…&freshness=…`` with the
  key in ``X-Subscription-Token`` (base ``https://api.search.brave.com``);
* ``tavily`` — Tavily: ``POST {base}/search`` with a JSON body (``query``, ``max_results``,
  ``include_domains``, ``time_range``) and ``Authorization: Bearer <key>`` (base
  ``https://api.tavily.com``).

Keys are read from the environment variable *named* by ``NETA_WEB_SEARCH_KEY_ENV``
(default ``BRAVE_API_KEY`` / ``TAVILY_API_KEY``), as models name theirs; the key itself is
never stored or shown. ``NETA_WEB_SEARCH_URL`` overrides the base URL of any backend (tests
point it at local servers). Requests go through the web guard (:mod:`toolcatalog.web_guard`)
with the backend's own host and port allowed — the operator chose it, it may be an intranet
SearXNG — and without following redirects.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from infra.lazy_settings import settings  # no Django at a subagent child's start-up
from toolcatalog.environment import server_setting_reason

BACKENDS = ("searxng", "brave", "tavily")
DEFAULT_BASE_URLS = {"brave": "https://api.search.brave.com", "tavily": "https://api.tavily.com"}
DEFAULT_KEY_ENVS = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}
RECENCIES = ("day", "week", "month", "year")
_BRAVE_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_COUNT = 20


class SearchError(Exception):
    """The backend could not answer (its message is safe to show: no key in it)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str
    published: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"title": self.title, "url": self.url, "snippet": self.snippet}
        if self.published:
            out["published"] = self.published
        return out


@dataclass(frozen=True, slots=True)
class SearchConfig:
    backend: str  # "" = none configured
    base_url: str
    key_env: str
    problem: str = ""  # why the selected backend cannot work ("" = fine)

    @property
    def configured(self) -> bool:
        return bool(self.backend)

    @property
    def usable(self) -> bool:
        return bool(self.backend) and not self.problem


def _setting(name: str, default: Any = "") -> Any:
    return getattr(settings, name, default) if settings.configured else default


def search_key_names() -> dict[str, str]:
    """The web search backend's key variable, for the tool catalog (no tool is handed it)."""
    config = search_config()
    return {config.key_env: "the web search backend's key"} if config.backend in DEFAULT_KEY_ENVS and config.key_env else {}


def search_config() -> SearchConfig:
    """The backend the settings select, and what is wrong with it (``problem``)."""
    backend = str(_setting("NETA_WEB_SEARCH_BACKEND", "") or "").strip().lower()
    if not backend:
        return SearchConfig(backend="", base_url="", key_env="")
    base_url = str(_setting("NETA_WEB_SEARCH_URL", "") or "").strip().rstrip("/")
    key_env = str(_setting("NETA_WEB_SEARCH_KEY_ENV", "") or "").strip()
    if backend not in BACKENDS:
        return SearchConfig(backend, base_url, key_env, f"NETA_WEB_SEARCH_BACKEND={backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "searxng" and not base_url:
        return SearchConfig(backend, base_url, key_env, "the searxng backend needs NETA_WEB_SEARCH_URL (the instance's base URL)")
    base_url = base_url or DEFAULT_BASE_URLS.get(backend, "")
    if urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).hostname:
        return SearchConfig(backend, base_url, key_env, f"NETA_WEB_SEARCH_URL={base_url!r} is not an http(s) URL")
    if backend in DEFAULT_KEY_ENVS:
        key_env = key_env or DEFAULT_KEY_ENVS[backend]
        if not _ENV_NAME.match(key_env):
            return SearchConfig(backend, base_url, key_env, f"NETA_WEB_SEARCH_KEY_ENV={key_env!r} is not an environment variable name")
        if server_setting_reason(key_env):
            return SearchConfig(backend, base_url, key_env, f"NETA_WEB_SEARCH_KEY_ENV: {server_setting_reason(key_env)}")
        if not os.environ.get(key_env):
            return SearchConfig(backend, base_url, key_env, f"the {backend} backend reads its key from ${key_env}, which is not set")
    return SearchConfig(backend, base_url, key_env)


def _get_json(url: str, *, config: SearchConfig, method: str = "GET", headers: dict[str, str] | None = None,
              body: bytes | None = None, cancel: Any = None) -> Any:
    from toolcatalog import web_guard  # http.client and ssl: loaded with the first search, not at registration

    parts = urlsplit(config.base_url)
    policy = web_guard.policy_from_settings().with_allowed(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    try:
        response = web_guard.request(url, method=method, headers=headers, body=body, policy=policy, follow_redirects=False, cancel=cancel)
    except web_guard.WebRefused as exc:
        raise SearchError(f"the {config.backend} backend's URL is refused: {exc}") from None
    except web_guard.WebFetchError as exc:
        raise SearchError(f"the {config.backend} backend did not answer: {exc}") from None
    if response.status != 200:
        text = response.body[:300].decode("utf-8", "replace").strip()
        raise SearchError(f"the {config.backend} backend answered HTTP {response.status} {response.reason}" + (f": {text}" if text else ""))
    try:
        return json.loads(response.body)
    except ValueError:
        raise SearchError(f"the {config.backend} backend did not answer JSON (is the json format enabled?)") from None


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, (str, int, float)) else ""


def _hits(items: Any, *, snippet_keys: tuple[str, ...], date_keys: tuple[str, ...], where: str) -> list[SearchHit]:
    if not isinstance(items, list):
        raise SearchError(f"the backend's answer has no result list ({where})")
    hits = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str) or not item["url"]:
            continue
        snippet = next((_text(item[k]) for k in snippet_keys if item.get(k)), "")
        published = next((_text(item[k]) for k in date_keys if item.get(k)), "")
        hits.append(SearchHit(title=_text(item.get("title")) or item["url"], url=item["url"], snippet=snippet, published=published))
    return hits


def _query(query: str, site: str | None) -> str:
    return f"{query} site:{site}" if site else query


def search(query: str, *, count: int = 5, site: str | None = None, recency: str | None = None,
           config: SearchConfig | None = None, cancel: Any = None) -> tuple[SearchConfig, list[SearchHit]]:
    """Ask the configured backend; at most ``count`` hits. ``SearchError`` when it cannot."""
    config = config or search_config()
    if not config.configured:
        raise SearchError("no search backend configured")
    if config.problem:
        raise SearchError(config.problem)
    count = max(1, min(MAX_COUNT, count))
    if config.backend == "searxng":
        params = {"q": _query(query, site), "format": "json", "pageno": 1}
        if recency:
            params["time_range"] = recency
        data = _get_json(f"{config.base_url}/search?{urlencode(params)}", config=config, headers={"Accept": "application/json"}, cancel=cancel)
        hits = _hits(data.get("results") if isinstance(data, dict) else None, snippet_keys=("content",), date_keys=("publishedDate",), where="results")
    elif config.backend == "brave":
        params = {"q": _query(query, site), "count": count}
        if recency:
            params["freshness"] = _BRAVE_FRESHNESS[recency]
        key = os.environ.get(config.key_env, "")
        data = _get_json(
            f"{config.base_url}/res/v1/web/search?{urlencode(params)}",
            config=config,
            headers={"Accept": "application/json", "X-Subscription-Token": key},
            cancel=cancel,
        )
        web = data.get("web") if isinstance(data, dict) else None
        hits = _hits((web or {}).get("results", []) if isinstance(web, dict) or web is None else None,
                     snippet_keys=("description",), date_keys=("page_age", "age"), where="web.results")
    else:  # tavily
        payload: dict[str, Any] = {"query": query, "max_results": count, "search_depth": "basic"}
        if site:
            payload["include_domains"] = [site]
        if recency:
            payload["time_range"] = recency
        key = os.environ.get(config.key_env, "")
        data = _get_json(
            f"{config.base_url}/search",
            config=config,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {key}"},
            body=json.dumps(payload).encode(),
            cancel=cancel,
        )
        hits = _hits(data.get("results") if isinstance(data, dict) else None, snippet_keys=("content",), date_keys=("published_date",), where="results")
    return config, hits[:count]
