"""The ``<available_skills>`` block for a system prompt, under a budget.

Unbudgeted, with ``loader="read"``, the text is byte-for-byte Pi's
``formatSkillsForPrompt``: ``\\n\\n``, three instruction lines, a blank line,
``<available_skills>``, one ``<skill>`` (name, description, location) per
skill, ``</available_skills>``; values XML-escaped. ``loader="read_skill"``
swaps the instruction lines for ones naming Neta's skill tools.

Which skills: the caller passes the skills the agent may use (see
``selectors.skills_visible``); skills with ``disable-model-invocation`` and
those on the policy's ``exclude`` list are never listed. Order: the
``include`` names first, in the order given, then the rest in discovery order.

Budget: ``budget_chars`` and/or ``budget_tokens`` (estimated as
``ceil(chars / 4)``) bound the **whole** returned text. Skills are taken in
order; one that does not fit is left out and the next ones are still tried.
When any skill is left out, a last line says how many, and the text with that
line is still within budget. If not even the frame fits, the text is empty and
``SkillIndex.omitted`` still says what was left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

LOADERS = ("read", "read_skill")

_INTRO = {
    "read": (
        "The following skills provide specialized instructions for specific tasks.",
        "Use the read tool to load a skill's file when the task matches its description.",
        "When a skill file references a relative path, resolve it against the skill directory (parent of "
        "SKILL.md / dirname of the path) and use that absolute path in tool commands.",
    ),
    "read_skill": (
        "The following skills provide specialized instructions for specific tasks.",
        "Use the read_skill tool with a skill's name to load its instructions when the task matches its description.",
        "When a skill references a relative path, load that file with read_skill_file(name, path), the path "
        "relative to the skill directory.",
    ),
}


class IndexableSkill(Protocol):
    name: str
    description: str
    entry_file: str
    disable_model_invocation: bool


@dataclass(frozen=True, slots=True)
class IndexEntry:
    name: str
    description: str
    location: str


@dataclass(frozen=True, slots=True)
class SkillIndex:
    text: str
    listed: tuple[str, ...]
    omitted: tuple[str, ...]
    excluded: tuple[str, ...] = ()  # on the policy's exclude list
    budget_chars: int | None = None  # the effective character limit (tokens converted)
    notes: tuple[str, ...] = field(default=())

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def tokens_estimate(self) -> int:
        return estimate_text_tokens(self.text)


def estimate_text_tokens(text: str) -> int:
    """Pi's estimate for plain text (four characters a token, rounded up); messages use
    ``sessions_tree.context.estimate_tokens``."""
    return math.ceil(len(text) / 4)


def escape_xml(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def _skill_lines(entry: IndexEntry) -> str:
    return (
        "  <skill>\n"
        f"    <name>{escape_xml(entry.name)}</name>\n"
        f"    <description>{escape_xml(entry.description)}</description>\n"
        f"    <location>{escape_xml(entry.location)}</location>\n"
        "  </skill>\n"
    )


def _omitted_line(count: int) -> str:
    noun = "skill is" if count == 1 else "skills are"
    return f"\n({count} more {noun} available but not listed, to keep this list within its budget.)"


def effective_char_budget(budget_chars: int | None, budget_tokens: int | None) -> int | None:
    limits = []
    if budget_chars is not None:
        limits.append(budget_chars)
    if budget_tokens is not None:
        limits.append(budget_tokens * 4)  # ceil(chars / 4) <= tokens  <=>  chars <= 4 * tokens
    return min(limits) if limits else None


def format_skill_index(
    skills: Iterable[IndexableSkill | IndexEntry],
    *,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    budget_chars: int | None = None,
    budget_tokens: int | None = None,
    loader: str = "read",
) -> SkillIndex:
    if loader not in LOADERS:
        raise ValueError(f"loader must be one of {LOADERS}, not {loader!r}")
    excluded_names = set(exclude)
    candidates: list[IndexEntry] = []
    excluded: list[str] = []
    for skill in skills:
        if getattr(skill, "disable_model_invocation", False):
            continue
        if skill.name in excluded_names:
            excluded.append(skill.name)
            continue
        location = skill.location if isinstance(skill, IndexEntry) else str(skill.entry_file)
        candidates.append(IndexEntry(skill.name, skill.description, location))
    rank = {name: i for i, name in enumerate(include)}
    candidates.sort(key=lambda e: rank.get(e.name, len(rank)))  # stable: the rest keep their order
    limit = effective_char_budget(budget_chars, budget_tokens)
    if not candidates:
        return SkillIndex("", (), (), tuple(excluded), limit)

    head = "\n\n" + "\n".join(_INTRO[loader]) + "\n\n<available_skills>\n"
    tail = "</available_skills>"
    blocks = [_skill_lines(e) for e in candidates]
    full = head + "".join(blocks) + tail
    if limit is None or len(full) <= limit:
        return SkillIndex(full, tuple(e.name for e in candidates), (), tuple(excluded), limit)

    # Something must go. Reserve room for the note with the largest count it could show.
    reserve = len(_omitted_line(len(candidates)))
    room = limit - len(head) - len(tail) - reserve
    listed: list[IndexEntry] = []
    omitted_list: list[str] = []
    parts: list[str] = []
    for entry, block in zip(candidates, blocks, strict=True):
        if len(block) <= room:
            listed.append(entry)
            parts.append(block)
            room -= len(block)
        else:
            omitted_list.append(entry.name)
    omitted = tuple(omitted_list)
    text = head + "".join(parts) + tail + _omitted_line(len(omitted))
    if room < 0 or len(text) > limit:
        return SkillIndex(
            "",
            (),
            tuple(e.name for e in candidates),
            tuple(excluded),
            limit,
            ("the budget is smaller than the block's frame; no skill is listed",),
        )
    return SkillIndex(text, tuple(e.name for e in listed), omitted, tuple(excluded), limit)


def format_skill_invocation(*, name: str, location: str, base_dir: str, body: str, args: str = "") -> str:
    """Pi's expansion of ``/skill:name args`` in a user message (body without frontmatter)."""
    block = f'<skill name="{name}" location="{location}">\nReferences are relative to {base_dir}.\n\n{body}\n</skill>'
    return f"{block}\n\n{args}" if args else block
