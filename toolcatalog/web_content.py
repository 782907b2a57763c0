"""What ``web_fetch`` makes of a response body: readable markdown, a PDF's text, plain text.

HTML goes through trafilatura (main-content extraction: navigation, ads, footers and
scripts dropped; headings, lists, tables, links and emphasis kept as markdown). A page
trafilatura finds no main content in falls back to its whole-page text. PDFs are read
with pypdf, page by page. ``text/*``, JSON, XML and the like are decoded as they are
(the declared charset, else UTF-8, invalid bytes replaced). Other types (images,
archives…) are refused with their type named.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_TYPES = ("application/pdf", "application/x-pdf")
TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/x-ndjson", "application/rss+xml", "application/atom+xml")


class UnsupportedContent(ValueError):
    """The body is of a kind ``web_fetch`` does not read."""


@dataclass(frozen=True, slots=True)
class PageText:
    text: str
    kind: str  # html | pdf | text
    title: str = ""
    extractor: str = ""  # trafilatura | trafilatura-fallback | pypdf | raw
    pages: int | None = None


def sniff_kind(content_type: str, body: bytes) -> str:
    """``html`` / ``pdf`` / ``text`` from the declared type, or from the bytes when it says nothing useful."""
    ctype = content_type.lower()
    if ctype in HTML_TYPES:
        return "html"
    if ctype in PDF_TYPES or body[:5] == b"%PDF-":
        return "pdf"
    if ctype.startswith("text/") or ctype in TEXT_TYPES or ctype.endswith("+json") or ctype.endswith("+xml"):
        return "text"
    if ctype in ("", "application/octet-stream", "binary/octet-stream"):
        head = body[:1024].lstrip().lower()
        if head.startswith(b"<!doctype html") or head.startswith(b"<html"):
            return "html"
        if b"\x00" not in body[:8192]:
            return "text"
    raise UnsupportedContent(f"the response is {content_type or 'binary data'}, which web_fetch does not read (HTML, PDF and text only)")


def decode_text(body: bytes, charset: str | None) -> str:
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", "replace")
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if body.startswith(bom):
            return body[2:].decode(codec, "replace")
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def html_to_markdown(body: bytes, *, url: str, charset: str | None) -> PageText:
    import trafilatura  # trafilatura and lxml (~0.5 s) load with the first page fetched

    # No charset in the headers: trafilatura reads the page's own <meta charset> (and guesses).
    html: str | bytes = decode_text(body, charset) if charset else body
    extracted = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        include_images=False,
        include_comments=False,
        favor_recall=True,
        with_metadata=False,
    )
    metadata = trafilatura.extract_metadata(html, default_url=url)
    title = (metadata.title if metadata is not None else "") or ""
    if extracted and extracted.strip():
        return PageText(text=extracted.strip(), kind="html", title=title, extractor="trafilatura")
    fallback = trafilatura.html2txt(html) or ""
    return PageText(text=fallback.strip(), kind="html", title=title, extractor="trafilatura-fallback")


def pdf_to_text(body: bytes) -> PageText:
    from pypdf import PdfReader  # pypdf loads with the first PDF
    from pypdf.errors import PdfReadError  # pypdf loads with the first PDF

    try:
        reader = PdfReader(io.BytesIO(body))
        if reader.is_encrypted:
            raise UnsupportedContent("the PDF is encrypted")
        pages = []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            pages.append(f"<!-- page {number} -->\n{text}" if len(reader.pages) > 1 else text)
        title = ""
        if reader.metadata is not None and reader.metadata.title:
            title = str(reader.metadata.title)
    except UnsupportedContent:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise UnsupportedContent(f"the PDF cannot be read: {type(exc).__name__}: {exc}") from None
    return PageText(text="\n\n".join(pages).strip(), kind="pdf", title=title, extractor="pypdf", pages=len(pages))


def to_page_text(body: bytes, *, content_type: str, charset: str | None, url: str, raw: bool = False) -> PageText:
    """The readable text of a response (``raw``: the body as text, no extraction)."""
    kind = sniff_kind(content_type, body)
    if kind == "pdf":
        return pdf_to_text(body)
    if raw or kind == "text":
        text = decode_text(body, charset)
        if content_type == "application/json" and not raw:
            try:
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass
        return PageText(text=text, kind=kind, extractor="raw")
    return html_to_markdown(body, url=url, charset=charset)
