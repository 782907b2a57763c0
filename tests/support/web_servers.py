"""Real local HTTP servers for the web tools' tests.

``SiteServer`` serves what ``web_fetch`` reads — an article page, a PDF, plain text,
JSON, an image, redirects (to itself, to another server, chains), a slow drip, a huge
body, a gzip bomb, error statuses — and **counts every request it receives**
(``server.hits``: method, path, headers), so a test can assert that nothing reached it.
``SearchServer`` speaks the three search APIs' JSON: SearXNG's ``GET /search?format=json``,
Brave's ``GET /res/v1/web/search`` (``X-Subscription-Token``) and Tavily's ``POST /search``
(``Authorization: Bearer``), recording each request. Both bind 127.0.0.1 on a port the
OS picks.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARTICLE_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Tree sessions explained</title>
<script>var tracking = "SCRIPT-NOISE-1234";</script><style>body{color:red}</style></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us NAV-NOISE</a></li><li><a href="/shop">Shop</a></li></ul></nav>
<div class="ad">BUY NOW AD-NOISE cheap watches</div>
<article>
<h1>Tree sessions explained</h1>
<p>A tree-shaped session keeps every message as an entry with an id and a parent id. A movable leaf
decides which root-to-leaf path the model sees, so users can continue from any earlier node.</p>
<h2>Why branches matter</h2>
<p>Branching never deletes anything: the old path stays in the file, and a <strong>branch summary</strong>
carries what was learned back to the new path. See <a href="https://example.org/pi">the Pi format</a>.</p>
<ul><li>Entries are immutable once completed.</li><li>Only the in-flight entry changes while streaming.</li></ul>
<table><tr><th>Provider</th><th>Storage</th></tr><tr><td>file</td><td>JSONL</td></tr><tr><td>mysql</td><td>rows</td></tr></table>
<p>Compaction replaces old turns with a summary while keeping the recent ones verbatim, and the context
builder walks from the leaf back to the root to assemble exactly what the model reads.</p>
</article>
<footer>Copyright FOOTER-NOISE 2026 · Privacy · Terms</footer>
</body></html>
"""

PLAIN_TEXT = "line one of the plain text\nline two: naïve café\n"


def make_pdf(pages: list[str], title: str = "Neta test PDF") -> bytes:
    """A small valid PDF with one line of Helvetica text per page (objects and xref computed)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    font_id = 3 + 2 * n_pages
    info_id = font_id + 1
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    for i, text in enumerate(pages):
        content_id = 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({title}) >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {info_id} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PDF_BYTES = make_pdf(["First page: the PDF says hello.", "Second page: goodbye from the PDF."])
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@dataclass
class Hit:
    method: str
    path: str
    headers: dict
    body: bytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _record(self) -> Hit:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        hit = Hit(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.owner.lock:
            self.server.owner.hits.append(hit)
        return hit

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _SiteHandler(_Base):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        hit = self._record()
        url = urlsplit(hit.path)
        query = parse_qs(url.query)
        path = url.path
        if path == "/article":
            self._send(200, ARTICLE_HTML.encode(), "text/html; charset=utf-8")
        elif path == "/article.gz":
            self._send(200, gzip.compress(ARTICLE_HTML.encode()), "text/html; charset=utf-8", {"Content-Encoding": "gzip"})
        elif path == "/latin1.html":
            page = '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head><body><article><h1>Caf\u00e9</h1>'
            page += "<p>" + "Cr\u00e8me br\u00fbl\u00e9e au caf\u00e9, servie ti\u00e8de. " * 6 + "</p></article></body></html>"
            self._send(200, page.encode("latin-1"), "text/html")
        elif path == "/doc.pdf":
            self._send(200, PDF_BYTES, "application/pdf")
        elif path == "/notes.txt":
            self._send(200, PLAIN_TEXT.encode(), "text/plain; charset=utf-8")
        elif path == "/latin1.txt":
            self._send(200, "café au lait\n".encode("latin-1"), "text/plain; charset=iso-8859-1")
        elif path == "/data.json":
            self._send(200, b'{"b": [1, 2], "a": "x"}', "application/json")
        elif path == "/image.png":
            self._send(200, PNG_BYTES, "image/png")
        elif path == "/long.txt":
            lines = int(query.get("lines", ["5000"])[0])
            self._send(200, "".join(f"line {i}\n" for i in range(1, lines + 1)).encode())
        elif path == "/redirect":
            self._send(int(query.get("code", ["302"])[0]), b"", headers={"Location": query["to"][0]})
        elif path.startswith("/chain/"):
            left = int(path.rsplit("/", 1)[1])
            if left:
                self._send(302, b"", headers={"Location": f"/chain/{left - 1}"})
            else:
                self._send(200, b"end of the chain\n")
        elif path == "/slow":
            # A body that trickles: headers at once, then one byte every 0.2 s for a minute.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "300")
            self.end_headers()
            try:
                for _ in range(300):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
        elif path == "/stall":
            time.sleep(float(query.get("s", ["60"])[0]))  # no status line for a long time
            try:
                self._send(200, b"too late")
            except OSError:
                pass
        elif path == "/huge":
            # Declares nothing and streams without end (chunked): the reader must stop it.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"y" * 65536
            try:
                for _ in range(2000):  # 128 MB at most
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
        elif path == "/huge-declared":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(500 * 1024 * 1024))
            self.end_headers()
            try:
                self.wfile.write(b"z" * 65536)
            except OSError:
                pass
        elif path == "/bomb":
            body = zlib.compress(b"\0" * (64 * 1024 * 1024), 9)  # 64 MB of zeros in ~64 KB
            self._send(200, body, "text/plain", {"Content-Encoding": "deflate"})
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._send(code, f"status page {code}\n".encode())
        elif path == "/echo-host":
            self._send(200, f"host header: {hit.headers.get('host')}\nuser agent: {hit.headers.get('user-agent')}\n".encode())
        else:
            self._send(404, b"not found\n")

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        self._record()
        self._send(405, b"no")


class SiteServer:
    """Pages for web_fetch; ``hits`` counts everything that arrived."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        self._server = _Server((host, 0), _SiteHandler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="web-site")

    def __enter__(self) -> SiteServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def reset(self) -> None:
        with self.lock:
            self.hits.clear()


# --------------------------------------------------------------------------- search APIs

RESULTS = [
    {"title": "Pi session format", "url": "https://example.org/pi", "snippet": "How Pi stores sessions as JSONL trees.", "date": "2026-11-30"},
    {"title": "Tree-shaped sessions", "url": "https://example.org/trees", "snippet": "Branches, leaves and summaries.", "date": ""},
    {"title": "Compaction in agents", "url": "https://example.com/compaction", "snippet": "Keeping context windows small.", "date": ""},
    {"title": "Subagents as processes", "url": "https://example.net/subagents", "snippet": "Isolation with OS processes.", "date": ""},
    {"title": "SSRF guards", "url": "https://example.net/ssrf", "snippet": "Resolve, check, pin, re-check redirects.", "date": ""},
    {"title": "Sixth result", "url": "https://example.net/six", "snippet": "Six.", "date": ""},
]


class _SearchHandler(_Base):
    def _results(self, count: int) -> list[dict]:
        owner = self.server.owner
        return (owner.results if owner.results is not None else RESULTS)[:count]

    def do_GET(self) -> None:  # noqa: N802
        hit = self._record()
        owner = self.server.owner
        url = urlsplit(hit.path)
        query = parse_qs(url.query)
        if owner.status != 200:
            self._send(owner.status, b'{"error": "scripted failure"}', "application/json")
        elif url.path == "/search":  # SearXNG
            if query.get("format") != ["json"]:
                self._send(403, b"Forbidden", "text/html")  # what SearXNG answers when json is not enabled
                return
            body = {
                "query": query.get("q", [""])[0],
                "number_of_results": len(RESULTS),
                "results": [
                    {"url": r["url"], "title": r["title"], "content": r["snippet"], "engine": "duckduckgo", "score": 1.0,
                     **({"publishedDate": r["date"]} if r["date"] else {})}
                    for r in self._results(len(RESULTS))
                ],
                "answers": [], "suggestions": [], "unresponsive_engines": [],
            }
            self._send(200, json.dumps(body).encode(), "application/json")
        elif url.path == "/res/v1/web/search":  # Brave
            if hit.headers.get("x-subscription-token") != owner.key:
                self._send(401, b'{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","status":401}}', "application/json")
                return
            count = int(query.get("count", ["20"])[0])
            body = {
                "type": "search",
                "query": {"original": query.get("q", [""])[0]},
                "web": {"type": "search", "results": [
                    {"title": r["title"], "url": r["url"], "description": r["snippet"], "type": "search_result",
                     **({"page_age": r["date"]} if r["date"] else {})}
                    for r in self._results(count)
                ]},
            }
            self._send(200, json.dumps(body).encode(), "application/json")
        else:
            self._send(404, b"{}", "application/json")

    def do_POST(self) -> None:  # noqa: N802
        hit = self._record()
        owner = self.server.owner
        if owner.status != 200:
            self._send(owner.status, b'{"detail": {"error": "scripted failure"}}', "application/json")
            return
        if urlsplit(hit.path).path != "/search":  # Tavily
            self._send(404, b"{}", "application/json")
            return
        if hit.headers.get("authorization") != f"Bearer {owner.key}":
            self._send(401, b'{"detail": {"error": "Unauthorized: missing or invalid API key."}}', "application/json")
            return
        request = json.loads(hit.body)
        body = {
            "query": request["query"],
            "response_time": 0.5,
            "results": [
                {"title": r["title"], "url": r["url"], "content": r["snippet"], "score": 0.9,
                 **({"published_date": r["date"]} if r["date"] else {})}
                for r in self._results(request.get("max_results", 5))
            ],
        }
        self._send(200, json.dumps(body).encode(), "application/json")


class SearchServer:
    """SearXNG / Brave / Tavily JSON on one port (their paths do not clash: Brave's is
    ``/res/v1/web/search``, SearXNG's ``GET /search``, Tavily's ``POST /search``)."""

    def __init__(self, key: str = "test-search-key") -> None:
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        self.key = key
        self.status = 200
        self.results: list[dict] | None = None
        self._server = _Server(("127.0.0.1", 0), _SearchHandler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="web-search")

    def __enter__(self) -> SearchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
