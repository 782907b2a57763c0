"""Reads: which skills a caller may use, the prompt index, a skill's text and files.

The one rule for "may this caller use this skill" lives in
:func:`skill_visibility`; the index, both tools and the staff pages go
through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from skills_registry import conf
from skills_registry.confinement import ConfinementError, read_confined
from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy
from skills_registry.prompt_index import SkillIndex, format_skill_index
from toolcatalog import catalog_version


class SkillUnavailable(Exception):
    """The caller may not use the skill, or there is no such usable skill."""


def skill_visibility(*, skill: SkillResource, policy: SkillPolicy, for_subagent: bool) -> tuple[bool, str]:
    """Whether ``skill`` is offered to the caller, and the reason."""
    if skill.status != SkillResource.Status.ACTIVE:
        return False, f"status is {skill.status}"
    if skill.disabled:
        return False, "disabled by staff"
    allowed, reason = policy.name_allowed(skill.name, for_subagent=for_subagent)
    if not allowed:
        return False, reason
    if for_subagent:
        if skill.requires_privilege:
            return False, "requires privilege (never offered to subagents)"
        if not skill.allow_in_subagent:
            return False, "denied in subagents by staff"
    return True, "visible"


def skills_visible(*, policy: SkillPolicy, for_subagent: bool = False) -> list[SkillResource]:
    """The skills the caller may use, in discovery (precedence) order."""
    # Every usable row, kept per process at the catalog's version when the caller knows it
    # (a run does: toolcatalog/catalog_version.py), then the policy's choice in Python.
    rows = catalog_version.cached(
        "skills_usable",
        lambda: list(SkillResource.objects.filter(status=SkillResource.Status.ACTIVE, disabled=False).order_by("discovery_order", "id")),
    )
    return [row for row in rows if skill_visibility(skill=row, policy=policy, for_subagent=for_subagent)[0]]


@dataclass(frozen=True, slots=True)
class VisibilityRow:
    skill: SkillResource
    visible: bool  # usable by the caller at all (the user, for a disable-model-invocation skill)
    reason: str
    model_visible: bool = True  # in the model's index, loadable with read_skill


USER_ONLY = "user-invoked only (disable-model-invocation): not in the model's index and read_skill refuses it; the user starts it with /skill:name"
NEVER_A_SUBAGENTS = "disable-model-invocation: only a person starts it, never a subagent"


def report_row(skill: SkillResource, *, policy: SkillPolicy, for_subagent: bool) -> VisibilityRow:
    """``skill_visibility`` as a caller meets it: a ``disable-model-invocation`` skill the policy
    allows is the user's to start, not the model's (and never a subagent's)."""
    visible, reason = skill_visibility(skill=skill, policy=policy, for_subagent=for_subagent)
    if visible and skill.disable_model_invocation:
        if for_subagent:
            return VisibilityRow(skill, False, NEVER_A_SUBAGENTS, model_visible=False)
        return VisibilityRow(skill, True, USER_ONLY, model_visible=False)
    return VisibilityRow(skill, visible, reason, model_visible=visible)


def skills_visibility_report(*, policy: SkillPolicy, for_subagent: bool = False) -> list[VisibilityRow]:
    """Every registered skill with whether the caller sees it and why (for staff pages)."""
    return [
        report_row(row, policy=policy, for_subagent=for_subagent)
        for row in SkillResource.objects.order_by("discovery_order", "id")
    ]


def skill_index_for(*, policy: SkillPolicy, for_subagent: bool = False, loader: str = "read") -> SkillIndex:
    """The ``<available_skills>`` block for a caller with ``policy``."""
    return format_skill_index(
        skills_visible(policy=policy, for_subagent=for_subagent),
        include=policy.include,
        exclude=policy.exclude,
        budget_chars=policy.index_budget_chars,
        budget_tokens=policy.index_budget_tokens,
        loader=loader,
    )


def skill_get_for_caller(*, name: str, policy: SkillPolicy, for_subagent: bool = False) -> SkillResource:
    """The usable skill called ``name`` that the caller may use, else :class:`SkillUnavailable`.

    The message is the same whether the skill does not exist or is not
    allowed, so a subagent learns nothing about skills it may not see.
    """
    for row in SkillResource.objects.filter(name=name, status=SkillResource.Status.ACTIVE).order_by("discovery_order"):
        if row.name == name and skill_visibility(skill=row, policy=policy, for_subagent=for_subagent)[0]:
            return row
    raise SkillUnavailable(
        f"No skill named {name!r} is available here (it does not exist, is disabled, "
        "or this agent's skill policy does not allow it)."
    )


def skill_entry_name(skill: SkillResource) -> str:
    return os.path.basename(skill.entry_file)


def skill_entry_text(skill: SkillResource, *, max_bytes: int | None = None) -> str:
    """The skill file's current text, read confined to the skill's folder."""
    limit = conf.max_entry_bytes() if max_bytes is None else max_bytes
    data = read_confined(skill.base_dir, skill_entry_name(skill), max_bytes=limit)
    return data.decode("utf-8", "replace")


def skill_file_paths(skill: SkillResource) -> list[str]:
    """Files attached to a folder skill (everything but the entry file), as recorded by the last sync."""
    if not skill.is_folder:
        return []
    entry = skill_entry_name(skill)
    return [f["path"] for f in skill.files if f.get("kind") == "file" and f.get("path") != entry]


__all__ = [
    "ConfinementError",
    "SkillUnavailable",
    "VisibilityRow",
    "skill_entry_text",
    "skill_file_paths",
    "skill_get_for_caller",
    "skill_index_for",
    "skill_visibility",
    "skills_visibility_report",
    "skills_visible",
]
