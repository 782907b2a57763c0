"""Documents in a prompt: a PDF, text, markdown or code file whose text goes into the
user message (docs/chat.md, "Documents"; docs/api.md, ``documents`` of a prompt).

A document is sent as ``{name, data (base64), mimeType?}``. Its text — a PDF's through
pypdf, any other file decoded as UTF-8 — is stored in the user message as one text block
with a document wrapper, so Pi, every model and every reader of the session see plain text:

    <document name="notes.md" type="text/markdown" chars="1234">
    …the text…
    </document>

A file that is too large, not readable (a PDF without a text layer, an encrypted one, a
binary file, text that is not UTF-8) or whose text is over the limit is refused with the
field ``documents[i]`` and what is wrong; nothing is written (the page keeps the prompt).
"""

from __future__ import annotations
from django.utils.translation import gettext as _

import binascii
import io
import logging

from runtime.errors import RuntimeInputError

logger = logging.getLogger(__name__)

MAX_DOCUMENTS = 8
MAX_DOCUMENT_BYTES = 10 * 1024 * 1024  # the file itself
MAX_DOCUMENT_BASE64 = (MAX_DOCUMENT_BYTES + 2) // 3 * 4
MAX_DOCUMENT_CHARS = 200_000  # its text (about 50,000 tokens)
MAX_PDF_PAGES = 500
MAX_NAME = 255

PDF = "application/pdf"
TEXT_TYPES = {
    "md": "text/markdown", "markdown": "text/markdown", "txt": "text/plain", "csv": "text/csv", "json": "application/json",
    "html": "text/html", "htm": "text/html", "xml": "application/xml", "yaml": "application/x-yaml", "yml": "application/x-yaml",
}  # fmt: skip


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def wrap_document(name: str, mime_type: str, text: str, *, pages: int | None = None) -> str:
    """The text block's text for a document (the wrapper the chat page shows as a chip)."""
    extra = f' pages="{pages}"' if pages is not None else ""
    return f'<document name="{_escape(name)}" type="{_escape(mime_type)}" chars="{len(text)}"{extra}>\n{text}\n</document>'


def _clean_name(value, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RuntimeInputError(field, _("needs a 'name' (the file's name)"))
    name = " ".join(value.split())  # one line
    if len(name) > MAX_NAME:
        raise RuntimeInputError(field, _("name is longer than %(max_name)s characters") % {"max_name": MAX_NAME})
    return name


def _mime_type(name: str, given, data: bytes) -> str:
    if given is not None and (not isinstance(given, str) or len(given) > 100):
        raise RuntimeInputError("mimeType", _("must be a media type such as text/plain"))
    if given == PDF or name.lower().endswith(".pdf") or data.startswith(b"%PDF-"):
        return PDF
    if given and given != "application/octet-stream":
        return given
    return TEXT_TYPES.get(name.rsplit(".", 1)[-1].lower(), "text/plain")


def _pdf_text(data: bytes, field: str, name: str) -> tuple[str, int]:
    from pypdf import PdfReader  # the PDF parser loads only when a PDF comes
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise RuntimeInputError(field, _("%(name)s is encrypted: save it without a password and attach it again") % {"name": name})
        pages = reader.pages
        if len(pages) > MAX_PDF_PAGES:
            raise RuntimeInputError(field, _("%(name)s has %(len_pages)s pages; at most %(max_pdf_pages)s are read") % {"name": name, "len_pages": len(pages), "max_pdf_pages": MAX_PDF_PAGES})
        texts = []
        total = 0
        for page in pages:
            text = page.extract_text() or ""
            total += len(text)
            if total > MAX_DOCUMENT_CHARS:
                raise RuntimeInputError(field, f"the text of {name} is over {MAX_DOCUMENT_CHARS:,} characters: attach a part of it")
            texts.append(text.strip())
    except RuntimeInputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError, NotImplementedError) as exc:
        logger.info("document %r: not a readable PDF (%s)", name, exc)
        raise RuntimeInputError(field, _("%(name)s could not be read as a PDF") % {"name": name}) from None
    text = "\n\n".join(t for t in texts if t)
    if not text.strip():
        raise RuntimeInputError(field, _("%(name)s has no text to read (a scanned PDF?): attach it as images, or paste its text") % {"name": name})
    return text, len(pages)


def _plain_text(data: bytes, field: str, name: str) -> str:
    if b"\x00" in data[:8192]:
        raise RuntimeInputError(field, _("%(name)s is not a text file: attach PDF, text, markdown or code files") % {"name": name})
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RuntimeInputError(field, _("%(name)s is not UTF-8 text") % {"name": name}) from None
    if len(text) > MAX_DOCUMENT_CHARS:
        raise RuntimeInputError(field, f"{name} holds {len(text):,} characters; at most {MAX_DOCUMENT_CHARS:,} fit a prompt: attach a part of it")
    if not text.strip():
        raise RuntimeInputError(field, _("%(name)s is empty") % {"name": name})
    return text.replace("\r\n", "\n")


def clean_documents(documents) -> list[dict]:
    """The prompt's documents as text blocks (``{"type": "text", "text": <wrapper>}``), in order."""
    if documents in (None, []):
        return []
    if not isinstance(documents, list) or len(documents) > MAX_DOCUMENTS:
        raise RuntimeInputError("documents", _("must be a list of at most %(max_documents)s documents") % {"max_documents": MAX_DOCUMENTS})
    blocks = []
    for i, doc in enumerate(documents):
        field = f"documents[{i}]"
        if not isinstance(doc, dict):
            raise RuntimeInputError(field, _("must be an object {name, data, mimeType?}"))
        name = _clean_name(doc.get("name"), field)
        raw = doc.get("data")
        if not isinstance(raw, str) or not raw:
            raise RuntimeInputError(field, _("needs base64 'data' (the file's bytes)"))
        if len(raw) > MAX_DOCUMENT_BASE64:
            raise RuntimeInputError(field, _("%(name)s is larger than %(max_document_bytes_1024_1024)s MB") % {"name": name, "max_document_bytes_1024_1024": MAX_DOCUMENT_BYTES // (1024 * 1024)})
        try:
            data = binascii.a2b_base64(raw, strict_mode=True)
        except (binascii.Error, ValueError):
            raise RuntimeInputError(field, _("'data' is not base64 (no whitespace or data URL prefix)")) from None
        mime_type = _mime_type(name, doc.get("mimeType"), data)
        if mime_type == PDF:
            text, pages = _pdf_text(data, field, name)
            blocks.append({"type": "text", "text": wrap_document(name, PDF, text, pages=pages)})
        else:
            text = _plain_text(data, field, name)
            blocks.append({"type": "text", "text": wrap_document(name, mime_type, text)})
    return blocks
