"""Agents in the console: the policy editors, who may use each agent, the system prompt preview,
the effective tools and skills; saves through ``agent_update`` / ``agent_set_access``."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from audit.admin import AuditedModelAdmin
from runtime.admin.agent_policies import (
    POLICY_FORMS,
    AgentAccessForm,
    SkillPolicyForm,
    SubagentPolicyForm,
    ToolPolicyForm,
    changed_policies,
)
from runtime.admin.common import grouped
from runtime.agents.report import agent_report, agent_reports
from runtime.agents.services import EDITABLE as AGENT_EDITABLE
from runtime.agents.services import (
    agent_set_access,
    agent_update,
)
from runtime.agents.subagent_policy import SubagentPolicy, SubagentPolicyError
from runtime.agents.system_prompt import build_system_prompt
from runtime.agents.tools import agent_tool_projection
from runtime.agents.workspaces import preview_cwd, workspace_layout
from runtime.models import (
    Agent,
    ModelConfig,
)
from runtime.subagents.host import child_projections
from sessions_tree.admin_lists import (
    LightListAdmin,
    LightRelatedFilter,
)
from sessions_tree.models import AgentSession
from skills_registry.policy import SkillPolicy, SkillPolicyError
from skills_registry.selectors import skills_visibility_report
from toolcatalog.policy import PolicyError
from toolcatalog.sandbox import effective_sandbox


def sandbox_line() -> str:
    """"sandbox: bwrap" or "sandbox: none — why" (the process's effective NETA_SANDBOX)."""

    return f"sandbox: {effective_sandbox().describe}"


class ModelNamesField(forms.CharField):
    """An agent's fallback models as one line, "name, name" in order; stored as a list of
    names (``Agent.clean`` says what is wrong with one: unknown, disabled, twice, the agent's own)."""

    def prepare_value(self, value):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value
        return ", ".join(value) if isinstance(value, list) else value or ""

    def to_python(self, value):
        text = super().to_python(value) or ""
        return [name for name in (part.strip() for part in text.replace("\n", ",").split(",")) if name]

    def has_changed(self, initial, data):
        return self.to_python(self.prepare_value(initial)) != self.to_python(data)


@admin.register(Agent)
class AgentAdmin(AuditedModelAdmin, LightListAdmin):
    """The agent list (model, store, usable, effective tool and skill counts, delegation) and
    page, and the structured policy editors (``<id>/policies/``). Changes to an existing agent
    go through ``agent_update`` (validated, audited); the name is fixed once it exists."""

    audit_action = "agent"
    list_display = (
        "name", "model", "session_provider", "usable", "tool_count", "skill_count", "subagents_on", "who_may_use", "workspace",
        "enabled",
    )  # fmt: skip
    exclude = ("access_restricted", "allowed_users", "allowed_groups")  # the access page (agent_set_access)
    list_blobs_shown = ("tool_policy", "skill_policy", "subagent_policy")  # summarized: the counts
    list_filter = ("session_provider", "workspace_mode", "enabled", ("model", LightRelatedFilter))
    list_select_related = ("model",)
    search_fields = ("name", "description")
    readonly_fields = (
        "policy_editor", "access", "warnings", "workspace_layout", "sandbox", "effective_tools", "effective_skills", "subagents",
        "system_prompt_preview", "created_at", "updated_at",
    )  # fmt: skip

    def _with_sandbox(self, extra_context):
        return {**(extra_context or {}), "subtitle": sandbox_line()}

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "fallback_models":
            enabled = ", ".join(ModelConfig.objects.filter(enabled=True).values_list("name", flat=True)[:30]) or "none"
            return ModelNamesField(
                label=_("fallback models"),
                required=False,
                widget=forms.TextInput(attrs={"size": 60, "placeholder": "e.g. backup-model, cheap-model"}),
                help_text=(
                    _("In order, separated by commas: asked when a call fails before any output (connection, timeout, 429, 5xx, overloaded), or a larger-window one on a context overflow. Enabled models: %(enabled)s.") % {"enabled": enabled}
                ),
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, self._with_sandbox(extra_context))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, self._with_sandbox(extra_context))

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated once; the template reuses the cache
        reports = agent_reports(rows)
        for agent in rows:
            agent._console_report = reports[agent.pk]
        return changelist

    def _report(self, obj):
        report = getattr(obj, "_console_report", None)
        if report is None:
            report = obj._console_report = agent_report(obj)
        return report

    def list_queryset(self, queryset):
        return super().list_queryset(queryset).annotate(
            listed_users=Count("allowed_users", distinct=True), listed_groups=Count("allowed_groups", distinct=True)
        )

    @admin.display(description=_("who may use it"))
    def who_may_use(self, obj):
        if not obj.access_restricted:
            return "everyone"
        users = getattr(obj, "listed_users", None)
        groups = getattr(obj, "listed_groups", None)
        if users is None:
            users, groups = obj.allowed_users.count(), obj.allowed_groups.count()
        return f"{users} user(s), {groups} group(s)"

    @admin.display(description=_("who may use it"))
    def access(self, obj):
        if obj.pk is None:
            return "everyone (editable once the agent is saved)"
        url = reverse("admin:runtime_agent_access", args=[obj.pk])
        if obj.access_restricted:
            users = ", ".join(obj.allowed_users.values_list("username", flat=True)) or "no user"
            groups = ", ".join(obj.allowed_groups.values_list("name", flat=True)) or "no group"
            shown = f"only {users}; members of {groups}"
        else:
            shown = "everyone"
        return format_html('{} · <a href="{}">Change who may use it</a>', shown, url)

    @admin.display(description=_("usable"), boolean=True)
    def usable(self, obj):
        return self._report(obj).usable

    @admin.display(description=_("tools"))
    def tool_count(self, obj):
        return self._report(obj).tool_count

    @admin.display(description=_("skills"))
    def skill_count(self, obj):
        return self._report(obj).skill_count

    @admin.display(description=_("subagents"))
    def subagents_on(self, obj):
        return "delegates" if self._report(obj).subagents_enabled else "off"

    @admin.display(description=_("workspace"), ordering="workspace_mode")
    def workspace(self, obj):
        return "shared (deliberate)" if obj.workspace_mode == "shared" else obj.get_workspace_mode_display()

    @admin.display(description=_("where tools work"))
    def workspace_layout(self, obj):

        return workspace_layout(obj)

    @admin.display(description=_("sandbox"))
    def sandbox(self, obj):
        return sandbox_line()

    @admin.display(description=_("policies"))
    def policy_editor(self, obj):
        if obj.pk is None:
            return "editable once the agent is saved"
        url = reverse("admin:runtime_agent_policies", args=[obj.pk])
        return format_html('<a class="button" href="{}">Edit tool, skill and subagent policies</a>', url)

    @admin.display(description=_("warnings"))
    def warnings(self, obj):
        if obj.pk is None:
            return "—"
        found = self._report(obj).warnings
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((w,) for w in found))) if found else "none"

    page_groups = (
        (None, ("name", "enabled", "model", "warnings", "policy_editor", "access")),
        ("Prompt", ("description", "system_prompt")),
        ("Sessions and workspace", (
            "session_provider", "restore_last_session", "summarize_on_switch", "cwd", "workspace_mode", "workspace_roots",
            "workspace_layout", "sandbox",
        )),
        ("Model calls and compaction", (
            "fallback_models", "thinking_level", "max_tool_rounds", "compaction_enabled", "compaction_reserve_tokens", "compaction_keep_recent_tokens",
            "branch_summary_reserve_tokens",
        )),
        ("What a run of it gets now", ("effective_tools", "subagents", "effective_skills", "system_prompt_preview")),
        ("Stored policies (JSON: the structured editor changes them)", ("tool_policy", "skill_policy", "subagent_policy"), ("collapse",)),
        ("Timestamps", ("created_at", "updated_at"), ("collapse",)),
    )  # fmt: skip

    def get_fieldsets(self, request, obj=None):
        return grouped(self.get_fields(request, obj), self.page_groups)

    def get_readonly_fields(self, request, obj=None):
        # Sessions and runs name their agent: a rename would hand them to the default agent.
        return (*self.readonly_fields, "name") if obj is not None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        if not change:
            return super().save_model(request, obj, form, change)  # created (audited by the mixin)
        fields = [name for name in form.changed_data if name in AGENT_EDITABLE]
        saved = agent_update(agent_id=obj.pk, actor=request.user, changes={name: getattr(obj, name) for name in fields})
        obj.refresh_from_db()
        return saved

    def get_deleted_objects(self, objs, request):
        # Sessions name their agent too (no foreign key): deleting it would hand them to
        # the default agent, with other tools and privileges. Protected like runs are.
        deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        names = [agent.name for agent in objs]
        for name in names:
            count = AgentSession.objects.filter(agent=name).count()
            if count:
                protected.append(f"{count} session(s) of agent {name} (delete or move them first)")
        return deleted, counts, perms, protected

    @admin.display(description=_("effective tools"))
    def effective_tools(self, obj):

        try:
            projection = agent_tool_projection(obj)  # the delegate tools included when its subagent policy allows
        except PolicyError as exc:
            return f"invalid tool policy: {exc}"
        rows = [
            f"{'✓' if d.effective else '✗'} {d.name} — {d.source}{': ' + d.reason if d.reason else ''}"
            for d in projection
        ]
        return format_html("<pre>{}</pre>", "\n".join(rows))

    @admin.display(description=_("subagents"))
    def subagents(self, obj):

        try:
            policy = SubagentPolicy.from_dict(obj.subagent_policy)
        except SubagentPolicyError as exc:
            return f"invalid subagent policy: {exc}"
        if not policy.enabled:
            return "delegation off (subagent_policy.enabled is false)"
        b = policy.child_budget
        return format_html(
            "<pre>{}</pre>",
            f"isolation: always a separate OS process (own process group, scrubbed environment)\n"
            f"child agents: {', '.join(policy.agents)}\n"
            f"depth {policy.max_depth} · {policy.max_tasks_per_call} tasks per call · {policy.max_concurrency} at once per run, "
            f"{policy.max_concurrency_per_session} per session\n"
            f"per child: {b.max_turns} turns, {b.max_tool_calls} tool calls, tokens {b.max_tokens or '∞'}, cost {b.max_cost or '∞'}, "
            f"{b.wall_clock_seconds:g} s wall clock, {b.idle_seconds:g} s idle\n"
            f"tools: allow {', '.join(policy.tools_allow) if policy.tools_allow is not None else '(parent ∩ child)'}; "
            f"deny {', '.join(policy.tools_deny) or '-'}\nskills: {', '.join(policy.skills) or 'none'}",
        )

    @admin.display(description=_("effective skills"))
    def effective_skills(self, obj):

        try:
            policy = SkillPolicy.from_dict(obj.skill_policy or {})
        except SkillPolicyError as exc:
            return f"invalid skill policy: {exc}"
        rows = [
            f"{'✓' if row.model_visible else '◐' if row.visible else '✗'} {row.skill.name} ({row.skill.scope}, {row.skill.status}) — {row.reason}"
            for row in skills_visibility_report(policy=policy)
        ]
        return format_html("<pre>{}</pre>", "\n".join(rows) or "no skills registered (skills_sync)")

    @admin.display(description=_("system prompt (as a run would build it now)"))
    def system_prompt_preview(self, obj):

        if obj.pk is None:
            return "shown once the agent is saved"
        return format_html("<pre style=\"white-space: pre-wrap\">{}</pre>", prompt_preview(obj))

    # --- the structured policy editors ----------------------------------------------

    def get_urls(self):
        urls = super().get_urls()
        view = self.admin_site.admin_view(self.policies_view)
        access = self.admin_site.admin_view(self.access_view)
        return [
            path("<path:object_id>/policies/", view, name="runtime_agent_policies"),
            path("<path:object_id>/access/", access, name="runtime_agent_access"),
            *urls,
        ]

    def _agent_page(self, request, object_id) -> tuple[Agent, bool]:
        """The agent of one of its own pages, and whether the user may change it: 404 for no
        such agent, 403 without view permission or for a POST without change permission."""
        agent = self.get_object(request, object_id)
        if agent is None:
            raise Http404(_("no such agent"))
        if not self.has_view_or_change_permission(request, agent):
            raise PermissionDenied
        can_change = self.has_change_permission(request, agent)
        if request.method == "POST" and not can_change:
            raise PermissionDenied
        return agent, can_change

    def access_view(self, request, object_id):
        """Who may use the agent: everyone, or the users and groups ticked (``agent_set_access``)."""
        agent, can_change = self._agent_page(request, object_id)
        form = AgentAccessForm(request.POST if request.method == "POST" else None, agent=agent)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            agent_set_access(agent_id=agent.pk, actor=request.user, restricted=data["restricted"], users=data["users"], groups=data["groups"])
            self.message_user(request, _("Saved who may use %(agent_name)s.") % {"agent_name": agent.name}, messages.SUCCESS)
            return HttpResponseRedirect(request.path)
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "original": agent,
            "title": _("Who may use %(agent_name)s") % {"agent_name": agent.name}, "form": form, "can_change": can_change,
        }  # fmt: skip
        return TemplateResponse(request, "admin/runtime/agent/access.html", context)

    def policies_view(self, request, object_id):
        agent, can_change = self._agent_page(request, object_id)
        data = request.POST if request.method == "POST" else None
        forms_ = {
            "tools": ToolPolicyForm(data, prefix="tools", policy=agent.tool_policy),
            "skills": SkillPolicyForm(data, prefix="skills", policy=agent.skill_policy),
            "subagents": SubagentPolicyForm(data, prefix="sub", policy=agent.subagent_policy, agent=agent),
        }
        errors: dict = {}
        if data is not None and all(f.is_valid() for f in forms_.values()):
            changes = changed_policies(agent, {
                "tool_policy": forms_["tools"].policy(),
                "skill_policy": forms_["skills"].policy(),
                "subagent_policy": forms_["subagents"].policy(),
            })  # fmt: skip
            try:
                agent_update(agent_id=agent.pk, actor=request.user, changes=changes)
            except ValidationError as exc:
                errors = exc.message_dict
            else:
                self.message_user(request, _("Saved the policies of %(agent_name)s.") % {"agent_name": agent.name}, messages.SUCCESS)
                return HttpResponseRedirect(request.path)
        elif data is not None:
            errors = {"form": ["some fields are not valid (marked below)"]}
        report = agent_report(agent)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "original": agent, "title": _("Policies of %(agent_name)s") % {"agent_name": agent.name},
            "subtitle": sandbox_line(), "report": report, "errors": errors, "can_change": can_change,
            "tool_pairs": list(zip(report.tools or (), report.subagent_tools or (), strict=True)),
            "skill_pairs": list(zip(report.skills, report.subagent_skills, strict=True)),
            "children": child_projections(agent),
            "stored": {name: json.dumps(getattr(agent, name), indent=2, ensure_ascii=False) for name in POLICY_FORMS},
            "prompt": prompt_preview(agent), **forms_,
        }  # fmt: skip
        return TemplateResponse(request, "admin/runtime/agent/policies.html", context, status=400 if errors else 200)


def prompt_preview(agent) -> str:
    """The system prompt a run of ``agent`` would be sent now (its own model's capabilities)."""
    try:
        return build_system_prompt(agent, agent_tool_projection(agent), cwd=preview_cwd(agent))
    except (PolicyError, ValueError) as exc:
        return f"cannot build it: {exc}"
