"""The Simplified Chinese catalogs are complete and current: every phrase the code marks is
translated (no fuzzy, no empty, the same placeholders), the committed .mo says what the .po
says, and the chat page's JSON catalog holds exactly the phrases its modules mark."""

from __future__ import annotations

import gettext
import re
import shutil

import pytest
from django.core.management import call_command

from neta.chat_catalog import catalog_problems, messages_in_source, read_catalog
from tests.i18n.po_files import read_po
from tests.support.services import REPO, require

LOCALE = REPO / "locale" / "zh_Hans" / "LC_MESSAGES"
PO, MO = LOCALE / "django.po", LOCALE / "django.mo"
PLACEHOLDER = re.compile(r"%\(\w+\)[sdr]|\{\w+\}")


def entries():
    return [e for e in read_po(PO) if e.msgid and not e.obsolete]


def test_every_phrase_is_translated_with_its_placeholders():
    problems = []
    for entry in entries():
        if "fuzzy" in entry.flags:
            problems.append(f"fuzzy: {entry.msgid!r}")
        if not entry.strs or not all(text.strip() for text in entry.strs.values()):
            problems.append(f"untranslated: {entry.msgid!r}")
            continue
        wanted = set(PLACEHOLDER.findall(entry.msgid)) | set(PLACEHOLDER.findall(entry.plural or ""))
        for text in entry.strs.values():
            if set(PLACEHOLDER.findall(text)) != wanted:
                problems.append(f"placeholders differ: {entry.msgid!r} → {text!r}")
    header = read_po(PO)[0].strs[0]
    assert "Plural-Forms: nplurals=1; plural=0;" in header and "charset=UTF-8" in header
    assert problems == [], "\n".join(problems)
    assert len(entries()) > 500


def test_the_committed_mo_matches_the_po():
    with MO.open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)._catalog  # noqa: SLF001 - the compiled messages themselves
    expected = {}
    for entry in entries():
        if entry.plural is None:
            expected[entry.key] = entry.strs[0]
        else:
            for n, text in entry.strs.items():
                expected[(entry.key, n)] = text
    compiled = {k: v for k, v in compiled.items() if k != ""}
    assert compiled == expected, "run: msgfmt -o locale/zh_Hans/LC_MESSAGES/django.mo locale/zh_Hans/LC_MESSAGES/django.po"


def test_the_po_holds_every_phrase_the_code_marks(tmp_path):
    """makemessages over a copy of the code finds no phrase the committed catalog lacks,
    and the catalog holds none the code no longer marks."""
    require(shutil.which("xgettext") is not None, "GNU gettext (xgettext) is not installed")
    copy = tmp_path / "neta"
    keep = shutil.ignore_patterns(".*", "var", "tests", "bench", "docs", "static", "test-artifacts", "node_modules", "__pycache__", "*.mo", "*.egg-info")
    shutil.copytree(REPO, copy, ignore=keep)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(copy)
        call_command("makemessages", locale=["zh_Hans"], no_obsolete=True, verbosity=0)
    fresh = {e.key for e in read_po(copy / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po") if e.msgid}
    committed = {e.key for e in entries()}
    assert fresh - committed == set(), "new phrases: run manage.py makemessages -l zh_Hans (docs/development.md) and translate them"
    assert committed - fresh == set(), "phrases the code no longer marks: run manage.py makemessages -l zh_Hans --no-obsolete"


def test_the_chat_pages_catalog_is_complete():
    assert catalog_problems("zh-hans") == []
    marked = messages_in_source()
    assert len(marked) > 400
    catalog = read_catalog("zh-hans")
    # Plurals are objects with the forms Chinese has; phrases are strings.
    assert all(isinstance(catalog[m], dict) == (plural is not None) for m, plural in marked.items())
