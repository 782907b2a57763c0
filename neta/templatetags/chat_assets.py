"""The chat page's script tags and import map, hashed names and all (neta/static_build.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils.safestring import mark_safe

from neta.chat_catalog import page_catalog
from neta.static_build import BUNDLE, collected

register = template.Library()

# Bare names the modules import (the bundle keeps them as imports of vendored files).
VENDOR = {
    "preact": "vendor/preact/preact.mjs",
    "preact/hooks": "vendor/preact/hooks.mjs",
    "htm": "vendor/htm/htm.mjs",
    "marked": "vendor/marked/marked.esm.js",
    "dompurify": "vendor/dompurify/purify.es.mjs",
    "katex": "vendor/katex/katex.mjs",
    "katex/katex.min.css": "vendor/katex/katex.min.css",
    "highlight/core.min.js": "vendor/highlight/core.min.js",
}
PRELOAD = ("preact", "preact/hooks", "htm", "marked", "dompurify", "highlight/core.min.js")


@lru_cache(maxsize=1)
def _languages() -> tuple[str, ...]:
    folder = Path(settings.BASE_DIR) / "static" / "vendor" / "highlight" / "languages"
    return tuple(sorted(p.name for p in folder.glob("*.min.js")))


def import_map() -> dict:
    imports = {name: static(path) for name, path in VENDOR.items()}
    for file in _languages():  # one entry a language: each file has its own hashed name
        imports[f"highlight/languages/{file}"] = static(f"vendor/highlight/languages/{file}")
    return {"imports": imports}


@register.simple_tag
def chat_importmap():
    """The import map (every page that loads the chat modules)."""
    text = json.dumps(import_map(), indent=1).replace("</", "<\\/")
    return mark_safe(f'<script type="importmap">\n{text}\n</script>')


@register.simple_tag
def chat_scripts():
    """The entry script: the bundle when collected, else the modules one by one; with the
    vendored modules it imports preloaded, so they load beside it, not after it."""
    entry = static(BUNDLE) if collected(BUNDLE) else static("chat/main.js")
    links = [f'<link rel="modulepreload" href="{entry}">']
    links += [f'<link rel="modulepreload" href="{static(VENDOR[name])}">' for name in PRELOAD]
    links.append(f'<script type="module" src="{entry}"></script>')
    return mark_safe("\n".join(links))


@register.simple_tag
def chat_i18n():
    """The chat page's catalog for the request's language (static/chat/i18n.js reads it)."""
    text = json.dumps(page_catalog(), ensure_ascii=False).translate(JSON_ESCAPES)
    return mark_safe(f'<script type="application/json" id="neta-i18n">{text}</script>')


JSON_ESCAPES = {ord("<"): "\\u003C", ord(">"): "\\u003E", ord("&"): "\\u0026"}
