"""Every word people read is marked for translation: the chat page's modules, the Django
templates (chat page, console), and the console's Python (admin labels, messages, help
texts). A new unmarked string fails here with its file and line; the allow-lists hold the
few words that are the same in every language (names, keys, file formats)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.i18n.unmarked import js_findings, template_findings
from tests.support.services import REPO

# Names and key names: Neta, keyboard keys, file kinds, HTTP headers, DOM types.
JS_ALLOWED = {"Neta", "Enter", "Escape", "Tab", "Files", "Content-Type", "Markdown", "Dockerfile", "Makefile", 'title="Enter"'}
TEMPLATE_ALLOWED = {"Neta", "· Neta", "MCP", "colM", "chat-page", "login-page", "chat-page shared-page", "ms)", "SKILL.md, r"}

JS_DIRS = (REPO / "static" / "chat", REPO / "static" / "console")
TEMPLATE_DIRS = [REPO / "templates", *(REPO / app / "templates" for app in ("runtime", "sessions_tree", "skills_registry", "toolcatalog", "audit", "neta"))]


def test_the_chat_pages_modules_mark_what_they_show():
    files = sorted(p for folder in JS_DIRS for p in folder.rglob("*.js"))
    assert len(files) > 40
    found = [str(f) for path in files for f in js_findings(path, REPO, JS_ALLOWED)]
    assert found == [], "not marked with t()/tn():\n" + "\n".join(found)


def test_the_templates_mark_what_they_show():
    files = sorted(p for folder in TEMPLATE_DIRS if folder.exists() for p in folder.rglob("*.html"))
    assert len(files) > 20
    found = [str(f) for path in files for f in template_findings(path, REPO, TEMPLATE_ALLOWED)]
    assert found == [], "not inside {% translate %} / {% blocktranslate %}:\n" + "\n".join(found)


# --------------------------------------------------------------------------- the console's Python

CONSOLE_MODULES = [
    *sorted((REPO / "runtime" / "admin").glob("*.py")),
    *sorted((REPO / "neta" / "console").glob("*.py")),
    REPO / "audit" / "admin.py",
    REPO / "audit" / "admin_actions.py",
    REPO / "sessions_tree" / "admin.py",
    REPO / "skills_registry" / "admin.py",
    REPO / "toolcatalog" / "admin.py",
    REPO / "runtime" / "pages" / "views.py",
    REPO / "runtime" / "pages" / "login_throttle.py",
]
LABEL_KEYWORDS = {"description", "help_text", "label", "verbose_name", "verbose_name_plural", "short_description", "empty_label"}
TRANSLATORS = {"_", "gettext", "gettext_lazy", "ngettext", "pgettext", "format_lazy", "ngettext_lazy"}


def _words(node) -> bool:
    """A string (or f-string) with words in it, written as it is."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return sum(c.isalpha() for c in node.value) >= 2
    return isinstance(node, ast.JoinedStr)


def python_findings(path: Path, root: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in TRANSLATORS:
            continue
        texts = [kw.value for kw in node.keywords if kw.arg in LABEL_KEYWORDS]
        if name == "message_user" and len(node.args) >= 2:
            texts.append(node.args[1])
        if name in ("error", "success", "warning", "info") and isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "messages" and len(node.args) >= 2:
            texts.append(node.args[1])
        if name in ("ValidationError", "PermissionDenied", "Http404") and node.args:
            texts.append(node.args[0])
        found += [f"{path.relative_to(root)}:{text.lineno}" for text in texts if _words(text)]
    return found


def test_the_consoles_python_marks_labels_messages_and_errors():
    found = [f for path in CONSOLE_MODULES for f in python_findings(path)]
    assert found == [], "not marked with gettext:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, kind",
    [
        ("const a = html`<button>Send now</button>`;", "js"),
        ('const a = html`<input placeholder="Your name" />`;', "js"),
        ('setError("Could not save the thing");', "js"),
        ("<p>Plain words</p>", "template"),
        ('<input title="A label">', "template"),
        ('self.message_user(request, "Done it")', "python"),
        ('@admin.display(description="runs")\ndef f(): pass', "python"),
    ],
)
def test_the_scanners_catch_an_unmarked_string(tmp_path, source, kind):
    """Each scanner finds what it is meant to (and the marked form passes)."""
    suffix = {"js": ".js", "template": ".html", "python": ".py"}[kind]
    path = tmp_path / f"sample{suffix}"
    path.write_text(source, encoding="utf-8")
    scan = {"js": js_findings, "template": template_findings, "python": python_findings}[kind]
    assert scan(path, tmp_path)
    marked = {
        "js": source.replace("Send now", '${t("Send now")}').replace('"Your name"', '${t("Your name")}').replace('"Could not save the thing"', 't("Could not save the thing")'),
        "template": source.replace("Plain words", '{% translate "Plain words" %}').replace('"A label"', '"{% translate \'A label\' %}"'),
        "python": source.replace('"Done it"', '_("Done it")').replace('"runs"', '_("runs")'),
    }[kind]
    path.write_text(marked, encoding="utf-8")
    assert scan(path, tmp_path) == []
