"""A skill's console page: where it lives, its versions (with a SKILL.md diff), which of the
skills of its name wins and why, and who can use it — each agent, and each agent's subagents.

"Who can use it" asks the registry's one rule (``skills_registry.selectors.report_row``) with
each agent's skill policy; as a subagent, with the policy a parent hands its child
(``runtime.subagents.host.allowed_skills_for`` decides, the rule gives the reason).
"""

from __future__ import annotations

import difflib

from django.contrib import admin
from django.http import Http404
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from runtime.agents.subagent_policy import SubagentPolicy, SubagentPolicyError
from runtime.models import Agent
from runtime.subagents.host import allowed_skills_for
from skills_registry.discovery import SCOPES
from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy, SkillPolicyError
from skills_registry.selectors import report_row

MAX_DIFF_LINES = 2000


def precedence(skill: SkillResource) -> list[dict]:
    """Every row with this skill's name, in discovery (precedence) order, with its part."""
    rows = list(
        SkillResource.objects.filter(name=skill.name)
        .only("pk", "name", "scope", "source", "status", "entry_file", "discovery_order", "disabled")
        .order_by("discovery_order", "id")
    )
    rows = [r for r in rows if r.name == skill.name]  # MySQL's collation compares names case-insensitively
    out = []
    winner = next((r for r in rows if r.status == SkillResource.Status.ACTIVE), None)
    for r in rows:
        if r.status == SkillResource.Status.ACTIVE:
            why = "wins: the first valid skill of this name in precedence order (project, then workspace, then user roots)"
        elif r.status == SkillResource.Status.SHADOWED:
            why = f"shadowed by {winner.scope} {winner.entry_file}" if winner else "shadowed by a skill found earlier"
        elif r.status == SkillResource.Status.INVALID:
            why = "invalid: its errors keep it out of the contest (see its diagnostics)"
        else:
            why = "missing: no longer on disk (its settings are kept)"
        out.append({"row": r, "why": why, "this": r.pk == skill.pk})
    return out


def who_can_use(skill: SkillResource, agents: list[Agent]) -> list[dict]:
    by_name = {a.name: a for a in agents}
    out = []
    for agent in agents:
        try:
            policy = SkillPolicy.from_dict(agent.skill_policy or {})
        except SkillPolicyError as exc:
            out.append({"agent": agent, "error": f"invalid skill policy: {exc}"})
            continue
        main = report_row(skill, policy=policy, for_subagent=False)
        children = []
        try:
            delegation = SubagentPolicy.from_dict(agent.subagent_policy)
        except SubagentPolicyError as exc:
            children.append({"child": None, "ok": False, "reason": f"invalid subagent policy: {exc}"})
            delegation = None
        if delegation is not None and delegation.enabled:
            for child_name in delegation.agents:
                child = by_name.get(child_name)
                if child is None:
                    children.append({"child": child_name, "ok": False, "reason": "no such agent"})
                    continue
                ok = skill.name in allowed_skills_for(child, delegation)
                if ok:
                    reason = "on the parent's subagent skills, and the child may see it"
                elif skill.name not in delegation.skills:
                    reason = "not on the parent's subagent skills (subagent_policy.skills)"
                else:
                    try:
                        narrowed = SkillPolicy.from_dict({**(child.skill_policy or {}), "subagent_allowed": list(delegation.skills)})
                        reason = report_row(skill, policy=narrowed, for_subagent=True).reason
                    except SkillPolicyError as exc:
                        reason = f"the child's skill policy is invalid: {exc}"
                children.append({"child": child_name, "ok": ok, "reason": reason})
        out.append({"agent": agent, "main": main, "children": children, "delegates": bool(delegation and delegation.enabled)})
    return out


def skill_md_diff(older: str, newer: str, *, older_name: str, newer_name: str) -> list[tuple[str, str]]:
    """(css class, line) of a unified diff of two SKILL.md texts."""
    lines = list(difflib.unified_diff(older.splitlines(), newer.splitlines(), older_name, newer_name, lineterm=""))
    out = []
    for line in lines[:MAX_DIFF_LINES]:
        kind = "diff-hunk" if line.startswith("@@") else "diff-add" if line.startswith("+") else "diff-del" if line.startswith("-") else ""
        out.append((kind, line))
    if len(lines) > MAX_DIFF_LINES:
        out.append(("diff-hunk", f"… {len(lines) - MAX_DIFF_LINES} more lines"))
    return out


def skill_detail(request, pk: int):
    skill = SkillResource.objects.filter(pk=pk).first()
    if skill is None:
        raise Http404(_("no such skill"))
    versions = list(skill.versions.order_by("-revision"))
    diff = None
    chosen = (request.GET.get("a"), request.GET.get("b"))
    if len(versions) >= 2:
        by_rev = {str(v.revision): v for v in versions}
        newer = by_rev.get(chosen[1] or "") or versions[0]
        older = by_rev.get(chosen[0] or "") or next((v for v in versions if v.revision < newer.revision), versions[-1])
        diff = {
            "older": older, "newer": newer,
            "lines": skill_md_diff(older.skill_md, newer.skill_md, older_name=f"SKILL.md r{older.revision}", newer_name=f"SKILL.md r{newer.revision}"),
            "unrecorded": not older.skill_md or not newer.skill_md,
        }
    agents = list(Agent.objects.only("pk", "name", "enabled", "skill_policy", "subagent_policy").order_by("name"))
    context = {
        **admin.site.each_context(request),
        "title": _("Skill %(skill_name)s") % {"skill_name": skill.name},
        "subtitle": None,
        "skill": skill,
        "scopes": SCOPES,
        "versions": versions,
        "diff": diff,
        "precedence": precedence(skill),
        "usage": who_can_use(skill, agents),
    }
    return TemplateResponse(request, "console/skill_detail.html", context)
