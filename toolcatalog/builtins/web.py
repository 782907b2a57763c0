"""``web_search`` and ``web_fetch``: look things up and read pages, through the web guard.

Both go out only through :mod:`toolcatalog.web_guard` (http/https only, every resolved
address checked on every hop, the connection pinned to the checked address, size, time
and redirect limits, the operator's allow and deny lists). ``web_search`` asks the
backend the settings select (:mod:`toolcatalog.web_search_backends`) and is unavailable —
absent from every projection, with the reason — when none is configured. ``web_fetch``
turns pages into markdown, PDFs and text into text (:mod:`toolcatalog.web_content`),
truncated like ``read`` (the head: 2000 lines / 50 KB, or ``max_chars``), with the full
text kept in a file named in the result.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from toolcatalog import web_search_backends
from toolcatalog.command_output import default_output_dir, prune_old_outputs
from toolcatalog.manifest import ToolManifest
from toolcatalog.protocol import Tool, ToolContext, ToolError, ToolResult
from toolcatalog.visible import is_blank
from toolcatalog.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head

MAX_CHARS_LIMIT = 200_000
MAX_URL_LENGTH = 8192  # web_guard.MAX_URL_LENGTH (the guard is imported with the first fetch)


class WebSearchTool(Tool):
    name = "web_search"
    changes = False
    settings_names = ("NETA_WEB_SEARCH_BACKEND", "NETA_WEB_SEARCH_URL", "NETA_WEB_SEARCH_KEY_ENV")
    label = "Web search"
    description = (
        "Search the web. Returns a numbered list of results (title, URL, snippet). Use `site` to search one "
        "domain and `recency` (day, week, month, year) for recent pages; read a result with web_fetch."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "What to search for"},
            "count": {"type": "integer", "minimum": 1, "maximum": web_search_backends.MAX_COUNT, "description": "How many results (default 5, at most 20)"},
            "site": {
                "type": "string",
                "minLength": 1,
                "maxLength": 253,
                "pattern": r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$",
                "description": "Only results from this domain, e.g. docs.python.org",
            },
            "recency": {"type": "string", "enum": list(web_search_backends.RECENCIES), "description": "Only results from the last day, week, month or year"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    # The backend's key and settings live in the main process (a subagent child's environment
    # holds only its model's key): subagents ask the main process to search, never search themselves.
    manifest = ToolManifest(kind="builtin", requires_network=True, supported_in_worker=False, default_route="main-process-proxy")

    def unavailable_reason(self) -> str:
        config = web_search_backends.search_config()
        if not config.configured:
            return "no search backend configured"
        if config.problem:
            return f"the search backend is misconfigured: {config.problem}"
        return ""

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        query = args["query"].strip()
        if is_blank(query):
            raise ToolError("query is blank")
        count = args.get("count", 5)
        try:
            config, hits = web_search_backends.search(query, count=count, site=args.get("site"), recency=args.get("recency"), cancel=ctx.cancel)
        except web_search_backends.SearchError as exc:
            raise ToolError(f"Search failed: {exc}", details={"query": query}) from None
        details = {"backend": config.backend, "query": query, "results": [h.to_dict() for h in hits]}
        if args.get("site"):
            details["site"] = args["site"]
        if args.get("recency"):
            details["recency"] = args["recency"]
        if not hits:
            return ToolResult.text(f"No results for {query!r}.", details=details)
        lines = []
        for number, hit in enumerate(hits, start=1):
            lines.append(f"{number}. {hit.title}\n   {hit.url}" + (f"\n   {hit.snippet}" if hit.snippet else "") + (f"\n   ({hit.published})" if hit.published else ""))
        return ToolResult.text("\n\n".join(lines), details=details)


def _keep_full_text(text: str, output_dir: Path | None) -> Path | None:
    directory = output_dir or default_output_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        prune_old_outputs(directory)
        path = directory / f"web_fetch-{uuid.uuid4().hex}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path
    except OSError:
        return None


class WebFetchTool(Tool):
    name = "web_fetch"
    settings_names = ("NETA_WEB_FETCH_ALLOW", "NETA_WEB_FETCH_DENY", "NETA_WEB_FETCH_MAX_BYTES", "NETA_WEB_FETCH_TIMEOUT", "NETA_WEB_FETCH_MAX_REDIRECTS")
    label = "Web fetch"
    description = (
        "Fetch a web page (http/https) and return its main content as markdown; PDFs and plain text are read "
        f"too. Output is truncated to {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB, or to max_chars; "
        "the full text is then saved to a file. raw=true returns the body without extraction. Private and "
        "internal addresses are refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_LENGTH, "description": "The http(s) URL to fetch"},
            "max_chars": {"type": "integer", "minimum": 100, "maximum": MAX_CHARS_LIMIT, "description": "Return at most this many characters"},
            "raw": {"type": "boolean", "description": "Return the body as text, without extracting the main content"},
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="builtin", requires_network=True, default_route="worker-local")

    def changes_with(self, args: dict[str, Any]) -> bool:
        """A fetch sends what its URL carries to a host the model chose: it asks in the
        ``ask_changes`` approval mode unless the host is one the operator trusts outright
        (on ``NETA_WEB_FETCH_ALLOW``)."""
        from toolcatalog import web_guard  # http.client and ssl come with it: loaded when a fetch is first judged

        try:
            parts = urlsplit(str(args.get("url") or "").strip())
            host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
            allow = web_guard.policy_from_settings().allow
        except ValueError:
            return True
        return not (host and any(rule.matches(web_guard.normalize_host(host), port) for rule in allow))

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        # http.client, ssl, trafilatura and pypdf come with the first fetch: a process that only
        # registers the tools (the subagent child's start) does not pay for them.
        from toolcatalog import web_content, web_guard

        url = args["url"].strip()
        raw = bool(args.get("raw", False))
        try:
            policy = web_guard.policy_from_settings()
        except ValueError as exc:
            raise ToolError(f"web_fetch is misconfigured on this server: {exc}") from None
        try:
            response = web_guard.request(url, policy=policy, headers={"Accept": "text/html,application/xhtml+xml,application/pdf,text/plain;q=0.9,*/*;q=0.5"}, cancel=ctx.cancel)
        except web_guard.WebRefused as exc:
            raise ToolError(f"Refused to fetch {url}: {exc}", details={"url": url, "refused": True}) from None
        except web_guard.WebFetchError as exc:
            raise ToolError(f"Could not fetch {url}: {exc}", details={"url": url}) from None
        ctx.check_cancelled()
        details: dict[str, Any] = {
            "url": url,
            "finalUrl": response.url,
            "status": response.status,
            "contentType": response.content_type,
            "bytes": len(response.body),
            "address": response.address,
            "durationMs": int(response.elapsed * 1000),
        }
        if response.redirects:
            details["redirects"] = response.redirects
        if not 200 <= response.status < 300:
            snippet = response.body[:2000].decode("utf-8", "replace").strip()
            raise ToolError(
                f"{response.url} answered HTTP {response.status} {response.reason}" + (f"\n\n{snippet}" if snippet else ""),
                details=details,
            )
        try:
            page = web_content.to_page_text(response.body, content_type=response.content_type, charset=response.charset, url=response.url, raw=raw)
        except web_content.UnsupportedContent as exc:
            raise ToolError(f"Could not read {response.url}: {exc}", details=details) from None
        details.update({"kind": page.kind, "extractor": page.extractor})
        if page.title:
            details["title"] = page.title
        if page.pages is not None:
            details["pages"] = page.pages
        repeats_title = page.text.lstrip().startswith(f"# {page.title}")
        header = (f"# {page.title}\n" if page.title and not repeats_title else "") + f"URL: {response.url}\n\n"
        full = header + (page.text or "(no readable text)")
        details["chars"] = len(full)
        text = full
        notice = ""
        max_chars = args.get("max_chars")
        if max_chars is not None and len(text) > max_chars:
            cut = text.rfind("\n", 0, max_chars)
            text = text[: cut if cut > max_chars // 2 else max_chars]
            notice = f"[Showing the first {len(text)} of {len(full)} characters (max_chars)."
        trunc = truncate_head(text)
        if trunc.truncated:
            details["truncation"] = trunc.to_details()
            text = trunc.content
            limit = f"{trunc.output_lines} of {trunc.total_lines} lines" if trunc.truncated_by == "lines" else f"{trunc.output_lines} of {trunc.total_lines} lines ({format_size(DEFAULT_MAX_BYTES)} limit)"
            notice = f"[Showing {limit}."
        if notice:
            saved = _keep_full_text(full, ctx.output_dir)
            if saved is not None:
                details["fullOutputPath"] = str(saved)
            notice += f" Full text: {saved}]" if saved is not None else " Full text not kept.]"
            text = f"{text}\n\n{notice}"
        return ToolResult.text(text, details=details)
