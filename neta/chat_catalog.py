"""The chat page's translations: one JSON catalog per language,
``locale/<locale>/LC_MESSAGES/chat.json``, embedded in the page by ``{% chat_i18n %}``
(static/chat/i18n.js reads it; docs/development.md, "Translations").

The page's modules mark their words with ``t("…")`` and ``tn("one", "other", n)``, whose
arguments are plain string literals; ``messages_in_source`` finds them, so a catalog can be
checked against the page (``manage.py chat_messages --check``, the tests) and brought up to
date (``manage.py chat_messages``: new phrases added untranslated, gone ones removed).
A catalog maps the English phrase to its translation; a plural maps the singular to
``{"other": …}`` (and ``"one"`` … for languages that have more forms).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.utils.translation import get_language, to_locale

# The chat page's modules, and the console's that reuse them (the live session tree).
SOURCE_DIRS = (Path(settings.BASE_DIR) / "static" / "chat", Path(settings.BASE_DIR) / "static" / "console")
_STRING = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
T_CALL = re.compile(rf"(?<![\w.$])t\(\s*({_STRING})")
TN_CALL = re.compile(rf"(?<![\w.$])tn\(\s*({_STRING})\s*,\s*({_STRING})")


def catalog_path(language: str) -> Path:
    return Path(settings.LOCALE_PATHS[0]) / to_locale(language) / "LC_MESSAGES" / "chat.json"


def _literal(text: str) -> str:
    if text.startswith("'"):
        text = '"' + text[1:-1].replace('\\"', '"').replace('"', '\\"') + '"'
        text = text.replace("\\'", "'")
    return json.loads(text)


def messages_in_source(folders: tuple[Path, ...] = SOURCE_DIRS) -> dict[str, str | None]:
    """Every phrase the page's modules mark: {singular: plural or None}."""
    found: dict[str, str | None] = {}
    for path in sorted(p for folder in folders for p in folder.rglob("*.js")):
        text = path.read_text(encoding="utf-8")
        for match in TN_CALL.finditer(text):
            found[_literal(match.group(1))] = _literal(match.group(2))
        for match in T_CALL.finditer(text):
            found.setdefault(_literal(match.group(1)), None)
    return found


def read_catalog(language: str) -> dict:
    path = catalog_path(language)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def catalog_problems(language: str) -> list[str]:
    """What is wrong with a language's catalog against the source: phrases missing,
    untranslated, or no longer in the page, and plurals given as phrases or the reverse."""
    marked = messages_in_source()
    catalog = read_catalog(language)
    problems = []
    for msgid, plural in marked.items():
        value = catalog.get(msgid)
        if value is None:
            problems.append(f"missing: {msgid!r}")
        elif plural is None and not (isinstance(value, str) and value.strip()):
            problems.append(f"untranslated: {msgid!r}")
        elif plural is not None and not (isinstance(value, dict) and str(value.get("other", "")).strip()):
            problems.append(f"untranslated plural: {msgid!r}")
        elif isinstance(value, str) and set(re.findall(r"\{\w+\}", msgid)) != set(re.findall(r"\{\w+\}", value)):
            problems.append(f"placeholders differ: {msgid!r}")
    problems += [f"not in the page: {msgid!r}" for msgid in catalog if msgid not in marked]
    return problems


def update_catalog(language: str) -> tuple[int, int]:
    """Add the new phrases (untranslated) and drop the gone ones; (added, removed)."""
    marked = messages_in_source()
    catalog = read_catalog(language)
    added = [m for m in marked if m not in catalog]
    removed = [m for m in catalog if m not in marked]
    fresh = {m: catalog.get(m, "" if marked[m] is None else {"other": ""}) for m in sorted(marked, key=str.casefold)}
    path = catalog_path(language)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fresh, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    _load.cache_clear()
    return len(added), len(removed)


@lru_cache(maxsize=8)
def _load(language: str) -> dict:
    catalog = read_catalog(language)
    return {k: v for k, v in catalog.items() if v and (not isinstance(v, dict) or v.get("other"))}


def page_catalog() -> dict:
    """What the page embeds for the request's language."""
    language = get_language() or settings.LANGUAGE_CODE
    return {"lang": language, "catalog": {} if language == "en" else _load(language)}
