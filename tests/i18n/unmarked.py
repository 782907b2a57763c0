"""Finds words meant for people that are not marked for translation: in the chat page's
modules (text and labels in ``html`` templates, sentences in string literals outside
``t()``/``tn()``) and in Django templates (text outside ``{% translate %}`` and
``{% blocktranslate %}``, labels in attributes). Used by ``test_unmarked.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.template.base import Lexer, TokenType

WORD = re.compile(r"[A-Za-z]{2,}")
LABEL_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt", "aria-description", "aria-roledescription", "label", "value")
ATTRIBUTE = re.compile(r'\b(' + "|".join(LABEL_ATTRIBUTES) + r')\s*=\s*"([^"]*)"')
ENTITY = re.compile(r"&[a-zA-Z]+;|&#\d+;")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text!r}"


# --------------------------------------------------------------------------- JavaScript


def _skip_string(src: str, i: int) -> int:
    """``src[i]`` opens a '…' or "…" string: the index after it."""
    quote = src[i]
    i += 1
    while i < len(src) and src[i] != quote:
        i += 2 if src[i] == "\\" else 1
    return i + 1


def _skip_expression(src: str, i: int, on_template) -> int:
    """``src[i]`` is just after ``${``: the index after the matching ``}``."""
    depth = 0
    while i < len(src):
        c = src[i]
        if c in "\"'":
            i = _skip_string(src, i)
            continue
        if c == "`":
            i = _scan_template(src, i, on_template)
            continue
        if c == "/" and src.startswith("//", i):
            i = src.index("\n", i)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    return i


def _scan_template(src: str, i: int, on_template) -> int:
    """``src[i]`` opens a template literal: hand its static parts to ``on_template`` (with
    whether it is an ``html`` template) and return the index after it."""
    tagged = src[max(0, i - 4) : i] == "html"
    i += 1
    parts: list[tuple[int, str]] = []
    start = i
    while i < len(src) and src[i] != "`":
        if src[i] == "\\":
            i += 2
            continue
        if src.startswith("${", i):
            parts.append((start, src[start:i]))
            i = _skip_expression(src, i + 2, on_template)
            start = i
            continue
        i += 1
    parts.append((start, src[start:i]))
    on_template(tagged, parts)
    return i + 1


def _line(src: str, index: int) -> int:
    return src.count("\n", 0, index) + 1


def _html_findings(path: str, src: str, parts: list[tuple[int, str]]) -> list[Finding]:
    """Text nodes and label attributes of one ``html`` template (its static parts, joined with
    a placeholder where an expression was)."""
    findings = []
    joined = "\x00".join(text for _start, text in parts)
    offsets = []
    for start, text in parts:
        offsets.append((start, len(text)))
    in_tag = False
    buffer, buffer_at = [], 0

    def flush(at):
        text = ENTITY.sub(" ", "".join(buffer)).replace("\x00", " ").strip()
        if WORD.search(text):
            findings.append(Finding(path, _line(src, _source_index(offsets, at)), text))
        buffer.clear()

    tag_text = []
    for k, c in enumerate(joined):
        if not in_tag and c == "<":
            flush(buffer_at)
            in_tag, tag_text = True, []
            continue
        if in_tag:
            if c == ">":
                in_tag = False
                tag = "".join(tag_text)
                for match in ATTRIBUTE.finditer(tag):
                    value = match.group(2).replace("\x00", "")
                    if WORD.search(value) and match.group(1) != "value":
                        findings.append(Finding(path, _line(src, _source_index(offsets, k)), f'{match.group(1)}="{value}"'))
                buffer_at = k + 1
            else:
                tag_text.append(c)
            continue
        if not buffer:
            buffer_at = k
        buffer.append(c)
    flush(buffer_at)
    return findings


def _source_index(offsets, joined_index: int) -> int:
    for start, length in offsets:
        if joined_index <= length:
            return start + joined_index
        joined_index -= length + 1
    return offsets[-1][0]


SENTENCE = re.compile(r"^[A-Z][a-z']+(?:[ ,:;.!?—-]+[A-Za-z'…]+)*[ .…:!?)]*$")
MARKED_BEFORE = re.compile(r"(?:(?<![\w.$])tn?\(\s*|(?<![\w.$])tn\(\s*(?:\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')\s*,\s*)$")


def js_findings(path: Path, root: Path, allowed: set[str] = frozenset()) -> list[Finding]:
    src = path.read_text(encoding="utf-8")
    rel = str(path.relative_to(root))
    findings: list[Finding] = []

    def on_template(tagged, parts):
        if tagged:
            findings.extend(f for f in _html_findings(rel, src, parts) if f.text not in allowed)

    i = 0
    while i < len(src):
        c = src[i]
        if src.startswith("//", i):
            i = src.find("\n", i)
            if i < 0:
                break
            continue
        if src.startswith("/*", i):
            i = src.index("*/", i) + 2
            continue
        if c in "\"'":
            end = _skip_string(src, i)
            value = src[i + 1 : end - 1]
            if SENTENCE.match(value) and value not in allowed and not MARKED_BEFORE.search(src[max(0, i - 300) : i]):
                line_start = src.rfind("\n", 0, i) + 1
                if not src[line_start:i].lstrip().startswith(("import ", "export ")):
                    findings.append(Finding(rel, _line(src, i), value))
            i = end
            continue
        if c == "`":
            i = _scan_template(src, i, on_template)
            continue
        i += 1
    return findings


# --------------------------------------------------------------------------- Django templates


def template_findings(path: Path, root: Path, allowed: set[str] = frozenset()) -> list[Finding]:
    """Text outside translation tags, and label attributes written as plain text. The template
    is read as HTML with each variable, tag and translated phrase as a placeholder."""
    src = path.read_text(encoding="utf-8")
    rel = str(path.relative_to(root))
    pieces: list[tuple[int, str]] = []  # (line, text) of the static parts, in order
    depth = 0  # inside {% blocktranslate %} … {% endblocktranslate %}, or a {% comment %}
    for token in Lexer(src).tokenize():
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0] if token.contents.split() else ""
            if name in ("blocktranslate", "blocktrans", "comment"):
                depth += 1
            elif name in ("endblocktranslate", "endblocktrans", "endcomment"):
                depth -= 1
            pieces.append((token.lineno, "\x00"))
        elif token.token_type == TokenType.TEXT and not depth:
            pieces.append((token.lineno, token.contents))
        elif token.token_type == TokenType.VAR:
            pieces.append((token.lineno, "\x00"))
    joined = "".join(text for _line, text in pieces)
    joined = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", lambda m: "\n" * m.group(0).count("\n"), joined, flags=re.S)
    first_line = pieces[0][0] if pieces else 1
    findings = []
    for line, text in _html_text(joined):
        if text not in allowed:
            findings.append(Finding(rel, first_line + line - 1, text))
    return findings


def _html_text(joined: str) -> list[tuple[int, str]]:
    """(line, text) of the text nodes and label attributes with words in them; ``\x00`` marks
    where a template tag or variable was."""
    found = []
    in_tag, buffer, tag = False, [], []
    line = buffer_line = 1

    def flush():
        text = ENTITY.sub(" ", "".join(buffer)).replace("\x00", " ")
        for piece in re.split(r"\s{2,}|\n", text):
            if WORD.search(piece):
                found.append((buffer_line, piece.strip()))
        buffer.clear()

    for c in joined:
        if c == "\n":
            line += 1
        if not in_tag and c == "<":
            flush()
            in_tag, tag = True, []
            continue
        if in_tag:
            if c == ">":
                in_tag = False
                for match in ATTRIBUTE.finditer("".join(tag)):
                    value = match.group(2).replace("\x00", " ").strip()
                    if match.group(1) != "value" and WORD.search(value):
                        found.append((line, f'{match.group(1)}="{value}"'))
            else:
                tag.append(c)
            continue
        if not buffer:
            buffer_line = line
        buffer.append(c)
    flush()
    return found
