"""Console forms as a browser submits them: read the page, change some fields, post it back.

``resubmit`` keeps every field the page offers with its current value (a disabled field is
not sent, as a browser does not send it), sets ``changes`` — also for fields the page does not
offer, as an attacker would — and posts the form to the page's URL."""

from __future__ import annotations

from html.parser import HTMLParser


class _FormFields(HTMLParser):
    """The fields of every POST form of a page (``forms``, in page order)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, list[str]]] = []
        self.fields: dict[str, list[str]] = {}
        self._textarea: str | None = None
        self._select: str | None = None
        self._in_form = False

    def _add(self, name: str, value: str) -> None:
        self.fields.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("method", "").lower() == "post" and not self._in_form:
            self._in_form = True
            self.fields = {}
            self.forms.append(self.fields)
            return
        if not self._in_form or "disabled" in a:
            return
        name = a.get("name")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self._add(name, a.get("value", "on"))
            elif kind not in ("submit", "button", "file"):
                self._add(name, a.get("value", ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields.setdefault(name, []).append("")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self._add(self._select, a.get("value", ""))

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form" and self._in_form:
            self._in_form = False

    def handle_data(self, data):
        if self._textarea:
            self.fields[self._textarea][-1] += data


def form_fields(html: str) -> dict[str, list[str]]:
    """The fields of the page's main form: the POST form with the most fields."""
    parser = _FormFields()
    parser.feed(html)
    return max(parser.forms, key=len, default={})


def resubmit(client, url: str, changes: dict):
    """GET ``url``, then POST its main form with ``changes`` applied; returns the answer (or the
    GET's, when the page is not there for this person)."""
    page = client.get(url)
    if page.status_code != 200:
        return page
    fields = form_fields(page.content.decode())
    for name, value in changes.items():
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value if isinstance(value, list) else [value]
    return client.post(url, fields)
