"""Agents, models, runs, integration tokens and sessions in the staff console.

Every write to a session, a run or a token goes through the service the API
uses (docs/console.md); what has no service is not offered. The session admin
is the kernel's read-only one (sessions_tree/admin.py) plus those writes.
"""

from __future__ import annotations

import json
import uuid

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, OuterRef, Prefetch, Q, Subquery, Sum
from django.db.models.functions import Substr
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince

from audit.admin import AuditedModelAdmin
from audit.admin_forms import ReadOnlyFieldErrorsForm
from audit.services import record
from runtime.agents.connection import model_test_connection
from runtime.agents.report import agent_report, agent_reports
from runtime.agents.services import EDITABLE as AGENT_EDITABLE
from runtime.agents.services import (
    MODEL_CREATABLE,
    MODEL_EDITABLE,
    agent_set_access,
    agent_update,
    may_direct_keys,
    model_config_create,
    model_config_update,
    model_write_problem,
)
from runtime.agents.system_prompt import build_system_prompt
from runtime.agents.tools import agent_tool_projection
from runtime.agents.workspaces import preview_cwd, workspace_layout
from runtime.api.tokens import (
    MAX_TOKEN_DAYS,
    api_token_create,
    api_token_revoke,
    api_token_rotate,
    may_issue_for,
)
from runtime.console.agent_policies import (
    POLICY_FORMS,
    AgentAccessForm,
    SkillPolicyForm,
    SubagentPolicyForm,
    ToolPolicyForm,
    changed_policies,
)
from runtime.errors import RuntimeInputError
from runtime.llm.options import known_options
from runtime.models import (
    CREDENTIAL_FIELDS,
    Agent,
    AgentRun,
    ApiToken,
    ModelConfig,
    RunInput,
    SessionShare,
    SubprocessRun,
    TokenScope,
)
from runtime.runs.prompts import run_abort
from runtime.sessions.sharing import run_feedback, share_revoke
from runtime.runs.selectors import active_run
from runtime.sessions.services import (
    agent_for_session_change,
    clean_title,
    session_compact,
    session_delete,
    session_deletion_summary,
    session_fork,
    session_rename,
    session_set_agent,
    session_set_status,
    session_switch_leaf,
)
from runtime.subagent_policy import SubagentPolicy, SubagentPolicyError
from runtime.subagents.host import child_projections
from runtime.subagents.services import subprocess_run_cancel
from sessions_tree.admin import AgentSessionAdmin, ViewOnly
from sessions_tree.admin_lists import (
    LightChangeList,
    LightListAdmin,
    LightRelatedFilter,
)
from sessions_tree.errors import SessionBusy, SessionNotFound, SessionTreeError
from sessions_tree.models import AgentSession
from skills_registry.policy import SkillPolicy, SkillPolicyError
from skills_registry.selectors import skills_visibility_report
from toolcatalog.policy import PolicyError
from toolcatalog.sandbox import effective_sandbox

ERROR_SHOWN = 300  # characters of a run's error a list row reads (the column may be long)


def _pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


def grouped(fields, groups, rest: str = "Other settings") -> list:
    """Fieldsets for a page: ``groups`` is ``(title, names[, classes])``; a field a group does not
    name (one added later) still shows, in a ``rest`` group at the end."""
    present = list(dict.fromkeys(fields))
    placed: set[str] = set()
    out = []
    for title, names, *classes in groups:
        mine = [name for name in names if name in present]
        placed.update(mine)
        if mine:
            out.append((title, {"fields": mine, "classes": classes[0] if classes else ()}))
    leftover = [name for name in present if name not in placed and name != "id"]
    if leftover:
        out.append((rest, {"fields": leftover}))
    return out


class ModelConfigForm(ReadOnlyFieldErrorsForm):
    """The model form; a problem with a field this person may not edit (a key variable shown
    read-only) is said at the top of the form, and the credentials rule of the services
    (``model_write_problem``: who may direct a key, where) is a form error, not a failed save."""

    acting = None  # the person saving (set by ModelConfigAdmin.get_form)

    def _post_clean(self):
        super()._post_clean()
        if self.acting is not None and not self.errors:
            try:
                model_write_problem(self.acting, self.instance, set(self.changed_data))
            except ValidationError as exc:
                self.add_error(None, exc)


@admin.register(ModelConfig)
class ModelConfigAdmin(AuditedModelAdmin, LightListAdmin):
    """Models: capabilities, prices, whether the key variable is set (never its value), the agents
    using each, options checked on save (``ModelConfig.clean``), and *Test connection*. Saves are
    audited (``AuditedModelAdmin``)."""

    audit_action = "model"
    form = ModelConfigForm
    list_display = (
        "name", "display_name", "provider_kind", "model_id", "capabilities", "context_window", "prices_per_m",
        "key_status", "agent_count", "enabled",
    )
    list_filter = ("provider_kind", "enabled")
    search_fields = ("name", "model_id", "display_name")
    readonly_fields = ("key_status", "agents_using", "known_options", "created_at", "updated_at")
    change_form_template = "admin/runtime/modelconfig/change_form.html"
    fieldsets = (
        (None, {"fields": ("name", "display_name", "enabled", "agents_using")}),
        ("Provider and key", {"fields": ("provider_kind", "provider_name", "model_id", "base_url", "api_key_env", "key_status")}),
        ("Capabilities and limits", {"fields": ("supports_tools", "supports_thinking", "supports_images", "context_window", "max_output_tokens")}),
        ("Prices (USD per million tokens)", {"fields": ("price_input", "price_output", "price_cache_read", "price_cache_write")}),
        ("Options", {"fields": ("options", "known_options")}),
        ("Timestamps", {"classes": ("collapse",), "fields": ("created_at", "updated_at")}),
    )

    def list_queryset(self, queryset):
        return super().list_queryset(queryset).annotate(agent_total=Count("agents"))

    @admin.display(description="capabilities")
    def capabilities(self, obj):
        caps = [name for name, on in (("tools", obj.supports_tools), ("thinking", obj.supports_thinking), ("images", obj.supports_images)) if on]
        return ", ".join(caps) or "text only"

    @admin.display(description="$ per M in / out")
    def prices_per_m(self, obj):
        return f"{obj.price_input:g} / {obj.price_output:g}"

    @admin.display(description="agents", ordering="agent_total")
    def agent_count(self, obj):
        return getattr(obj, "agent_total", None)

    @admin.display(description="API key")
    def key_status(self, obj):
        if obj.provider_kind == "scripted":
            return "not needed"
        if not obj.api_key_env:
            return "no variable named"
        # Only whether it is set: the value is never shown.
        return f"{obj.api_key_env} is set" if obj.key_is_set else f"{obj.api_key_env} is NOT set"

    @admin.display(description="agents using it")
    def agents_using(self, obj):
        if obj.pk is None:
            return "—"
        agents = list(obj.agents.only("pk", "name", "enabled").order_by("name"))
        if not agents:
            return "none"
        return format_html_join(
            ", ", '<a href="{}">{}</a>{}',
            ((reverse("admin:runtime_agent_change", args=[a.pk]), a.name, "" if a.enabled else " (disabled)") for a in agents),
        )

    @admin.display(description="options this provider reads")
    def known_options(self, obj):
        return ", ".join(known_options(obj.provider_kind)) if obj.provider_kind else "—"

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type(form.__name__, (form,), {"acting": request.user})

    def get_readonly_fields(self, request, obj=None):
        fields = list(self.readonly_fields)
        if obj is not None:
            fields.append("name")  # runs name the model they used (``AgentRun.model_name``): a rename would orphan them
        if not may_direct_keys(request.user):
            # Where a key goes is the "Can direct API keys" permission's (docs/security.md): without it a
            # new model has no key or endpoint, and a saved one keeps its provider, endpoint and key.
            fields += ["base_url", "api_key_env"] if obj is None else list(CREDENTIAL_FIELDS)
        return fields

    def save_model(self, request, obj, form, change):
        """Through the services the API uses: ``model_config_create`` for a new model,
        ``model_config_update`` for the fields the form changed — validated, the credentials rule
        applied, saved and audited in one transaction."""
        if not change:
            fields = {f.name: getattr(obj, f.name) for f in ModelConfig._meta.concrete_fields if f.name in MODEL_CREATABLE}
            saved = model_config_create(actor=request.user, fields=fields)
            obj.pk = saved.pk
            obj.refresh_from_db()
            return
        fields = [name for name in form.changed_data if name in MODEL_EDITABLE]
        model_config_update(model_id=obj.pk, actor=request.user, changes={name: getattr(obj, name) for name in fields})
        obj.refresh_from_db()

    def get_urls(self):
        test = path("<path:object_id>/test/", self.admin_site.admin_view(self.test_connection_view), name="runtime_modelconfig_test")
        return [test, *super().get_urls()]

    def test_connection_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        model = self.get_object(request, object_id)
        if model is None:
            raise Http404("no such model")
        if not self.has_change_permission(request, model):
            raise PermissionDenied  # it calls the provider (and may cost a few tokens): for those who may change models
        result = model_test_connection(model=model)
        request.session["console_model_test"] = {"model": model.pk, **result.to_dict()}
        return HttpResponseRedirect(reverse("admin:runtime_modelconfig_change", args=[model.pk]))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        tested = request.session.get("console_model_test")
        if tested and object_id and str(tested.get("model")) == str(object_id):
            extra["connection_test"] = request.session.pop("console_model_test")
        return super().changeform_view(request, object_id, form_url, extra)


class RunInputInline(ViewOnly, admin.TabularInline):
    """A run's queued follow-ups and steers, as the runtime stored them (prompts add them)."""

    model = RunInput
    extra = 0
    can_delete = False
    readonly_fields = ("kind", "text", "consumed", "created_at")
    fields = readonly_fields

    def get_queryset(self, request):
        return super().get_queryset(request).defer("images")  # not shown here (a prompt's images: megabytes)


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
                label="fallback models",
                required=False,
                widget=forms.TextInput(attrs={"size": 60, "placeholder": "e.g. backup-model, cheap-model"}),
                help_text=(
                    "In order, separated by commas: asked when a call fails before any output (connection, timeout, 429, 5xx, "
                    f"overloaded), or a larger-window one on a context overflow. Enabled models: {enabled}."
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

    @admin.display(description="who may use it")
    def who_may_use(self, obj):
        if not obj.access_restricted:
            return "everyone"
        users = getattr(obj, "listed_users", None)
        groups = getattr(obj, "listed_groups", None)
        if users is None:
            users, groups = obj.allowed_users.count(), obj.allowed_groups.count()
        return f"{users} user(s), {groups} group(s)"

    @admin.display(description="who may use it")
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

    @admin.display(description="usable", boolean=True)
    def usable(self, obj):
        return self._report(obj).usable

    @admin.display(description="tools")
    def tool_count(self, obj):
        return self._report(obj).tool_count

    @admin.display(description="skills")
    def skill_count(self, obj):
        return self._report(obj).skill_count

    @admin.display(description="subagents")
    def subagents_on(self, obj):
        return "delegates" if self._report(obj).subagents_enabled else "off"

    @admin.display(description="workspace", ordering="workspace_mode")
    def workspace(self, obj):
        return "shared (deliberate)" if obj.workspace_mode == "shared" else obj.get_workspace_mode_display()

    @admin.display(description="where tools work")
    def workspace_layout(self, obj):

        return workspace_layout(obj)

    @admin.display(description="sandbox")
    def sandbox(self, obj):
        return sandbox_line()

    @admin.display(description="policies")
    def policy_editor(self, obj):
        if obj.pk is None:
            return "editable once the agent is saved"
        url = reverse("admin:runtime_agent_policies", args=[obj.pk])
        return format_html('<a class="button" href="{}">Edit tool, skill and subagent policies</a>', url)

    @admin.display(description="warnings")
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

    @admin.display(description="effective tools")
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

    @admin.display(description="subagents")
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

    @admin.display(description="effective skills")
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

    @admin.display(description="system prompt (as a run would build it now)")
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
            raise Http404("no such agent")
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
            self.message_user(request, f"Saved who may use {agent.name}.", messages.SUCCESS)
            return HttpResponseRedirect(request.path)
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "original": agent,
            "title": f"Who may use {agent.name}", "form": form, "can_change": can_change,
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
                self.message_user(request, f"Saved the policies of {agent.name}.", messages.SUCCESS)
                return HttpResponseRedirect(request.path)
        elif data is not None:
            errors = {"form": ["some fields are not valid (marked below)"]}
        report = agent_report(agent)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "original": agent, "title": f"Policies of {agent.name}",
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


@admin.register(SubprocessRun)
class SubprocessRunAdmin(ViewOnly, LightListAdmin):
    """Subagent children: the host's records (docs/subagents.md); read-only, cancel through the service."""

    list_display = ("run_id", "session_id", "agent", "task_index", "status", "error_code", "pid", "event_count", "created_at")
    list_filter = ("status", "mode", "backend")

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "parent_run__id__exact" or super().lookup_allowed(lookup, value, request)  # the runs list links here
    search_fields = ("run_id", "session_id", "batch_id")
    show_full_result_count = False
    readonly_fields = [f.name for f in SubprocessRun._meta.fields if f.name != "envelope"]
    exclude = ("envelope",)
    actions = ["cancel_runs"]

    def has_cancel_permission(self, request):
        return request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun")

    @admin.action(description="Cancel the selected subagent runs", permissions=["cancel"])
    def cancel_runs(self, request, queryset):
        count = 0
        for run in queryset:
            if run.is_active:
                subprocess_run_cancel(run, by=f"staff {request.user.username} (console)", actor=request.user)
                count += 1
        self.message_user(request, f"asked {count} subagent run(s) to stop")


class RunDateFilter(admin.DateFieldListFilter):
    title = "created"


@admin.register(AgentRun)
class AgentRunAdmin(ViewOnly, LightListAdmin):
    """Runs: who, which agent and model, how long, what it cost, how it ended (the error's first
    line, cut in the database: the column itself may be long), with links to the session and
    the run's subagent children. Searchable by run, session, user and agent; filterable by date."""

    list_display = (
        "run_id_short", "user", "agent", "model_used", "status", "duration", "tokens", "cost_usd", "error_head", "session_link",
        "subagent_link", "aborted_by", "created_at",
    )
    list_filter = ("status", ("created_at", RunDateFilter), ("agent", LightRelatedFilter))
    search_fields = ("=run_id", "=session_id", "user__username", "agent__name")  # as get_search_results reads them
    search_help_text = "A run or session id (whole), or part of a user's or agent's name."

    def get_search_results(self, request, queryset, search_term):
        """The search_fields, but the names are looked up in the users' and agents' tables first and
        the runs filtered by those ids: no join, so the runs' indexes answer (a joined LIKE over
        100k runs takes seconds)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        users = get_user_model().objects.filter(username__icontains=term).values_list("id", flat=True)[:1000]
        agents = Agent.objects.filter(name__icontains=term).values_list("id", flat=True)[:1000]
        match = Q(session_id=term) | Q(user_id__in=list(users)) | Q(agent_id__in=list(agents))
        try:
            match |= Q(run_id=uuid.UUID(term))
        except ValueError:
            pass
        return queryset.filter(match), False
    # Prefetched, not joined (see list_queryset): no list_select_related.
    list_select_related = ()
    list_per_page = 50
    show_full_result_count = False
    readonly_fields = [*(f.name for f in AgentRun._meta.fields), "session_page", "model_used", "run_notes", "feedback"]
    inlines = [RunInputInline]
    page_groups = (
        (None, ("run_id", "status", "error", "run_notes", "feedback", "session_page", "agent", "user", "model_used", "created_at", "started_at", "finished_at", "cancelled_by")),
        ("Tokens and cost", ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost", "rounds")),
        ("Prompt", ("prompt", "images", "from_entry_id", "prompt_entry_id", "question", "waiting_since", "session_id", "model_name")),
        ("Where it ran", (
            "backend", "worker", "host", "pid", "process_started", "submitted_at", "submissions", "heartbeat_at", "cancel_requested",
            "in_flight_entry_id",
        ), ("collapse",)),
    )  # fmt: skip

    def get_fieldsets(self, request, obj=None):
        return grouped(self.get_fields(request, obj), self.page_groups, rest="More")
    actions = ["abort_runs"]

    def list_queryset(self, queryset):
        children = (
            SubprocessRun.objects.filter(parent_run=OuterRef("pk")).order_by().values("parent_run").annotate(n=Count("id")).values("n")
        )
        # The agent, its model and the users come in three small queries after the page's: joined,
        # the database may start from the agents and sort every run (seconds at 100k runs) where
        # the runs' created_at index alone yields the page (bench/console_lists.py).
        users = get_user_model().objects.only("id", "username")
        return (
            super()
            .list_queryset(queryset)
            .annotate(error_first=Substr("error", 1, ERROR_SHOWN), subagent_total=Subquery(children))
            .prefetch_related(
                Prefetch("agent", queryset=Agent.objects.select_related("model").only("id", "name", "model__name")),
                Prefetch("user", queryset=users),
                Prefetch("cancelled_by", queryset=users),
            )
        )

    @admin.display(description="run", ordering="created_at")
    def run_id_short(self, obj):
        return str(obj.run_id)[:8]

    @admin.display(description="model")
    def model_used(self, obj):
        name = obj.model_name or obj.agent.model.name
        if "notes" in obj.get_deferred_fields():  # the list (no blobs loaded): the run page says more
            return name
        answered = [n.get("model") for n in (obj.notes or []) if n.get("kind") == "failover" and n.get("model")]
        return f"{name} (answered by {', '.join(dict.fromkeys(answered))} after a failover)" if answered else name

    @admin.display(description="notes")
    def run_notes(self, obj):
        """What the run did on its own (runtime/runs/notes.py): failovers, clamped thinking levels."""
        notes = obj.notes or []
        if not notes:
            return "none"
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}: {}</li>", ((n.get("kind", ""), n.get("text", "")) for n in notes)))

    @admin.display(description="feedback")
    def feedback(self, obj):
        """👍 / 👎 and notes the chat page stored on this run's answers (neta.feedback entries)."""
        given = run_feedback(obj)
        if not given:
            return "none"
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", "<li>{} {}{} <span class=\"muted\">({}, answer {})</span></li>", (
                ("👍" if f["rating"] == "up" else "👎", f.get("note") or "", "", f.get("by") or "?", f["entryId"][:8]) for f in given
            )),
        )  # fmt: skip

    @admin.display(description="duration")
    def duration(self, obj):
        if not obj.started_at:
            return "—"
        end = obj.finished_at or timezone.now()
        seconds = (end - obj.started_at).total_seconds()
        return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"

    @admin.display(description="cost $", ordering="cost")
    def cost_usd(self, obj):
        return f"{obj.cost:.4f}"

    @admin.display(description="tokens in / out")
    def tokens(self, obj):
        return f"{obj.input_tokens} / {obj.output_tokens}"

    @admin.display(description="error")
    def error_head(self, obj):
        text = getattr(obj, "error_first", "") or ""
        if not text:
            return ""
        line = text.splitlines()[0] if text.strip() else text
        return format_html('<span class="error-text">{}{}</span>', line[:160], "…" if len(text) >= ERROR_SHOWN or len(line) > 160 else "")

    @admin.display(description="session")
    def session_link(self, obj):
        url = reverse("admin:sessions_tree_agentsession_change", args=[obj.session_id])  # the session's page, by its id
        return format_html('<a href="{}" title="{}">{}</a>', url, obj.session_id, obj.session_id[:13])

    @admin.display(description="session")
    def session_page(self, obj):
        url = reverse("admin:sessions_tree_agentsession_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a>', url, obj.session_id)

    @admin.display(description="subagents")
    def subagent_link(self, obj):
        n = getattr(obj, "subagent_total", None) or 0
        if not n:
            return "—"
        url = reverse("admin:runtime_subprocessrun_changelist") + f"?parent_run__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, n)

    @admin.display(description="aborted by")
    def aborted_by(self, obj):
        return obj.cancelled_by.get_username() if obj.cancelled_by_id else ""

    # Runs are the runtime's records: no add or edit, and no delete (ViewOnly: they go with
    # their session, through session_delete). Staff who may change runs may abort them.
    def has_abort_permission(self, request):
        return request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun")

    @admin.action(description="Abort the selected runs", permissions=["abort"])
    def abort_runs(self, request, queryset):
        count = 0
        for run in queryset:
            if run.is_active:
                run_abort(run=run, actor=request.user)
                count += 1
        self.message_user(request, f"asked {count} run(s) to stop", messages.SUCCESS)


# --------------------------------------------------------------------------- integration tokens


class ApiTokenAddForm(forms.ModelForm):
    days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TOKEN_DAYS, help_text="Expire after this many days (empty: never)."
    )

    class Meta:
        model = ApiToken
        fields = ("user", "name", "scope")

    acting = None  # the person adding the token (set by ApiTokenAdmin.get_form)

    def clean_user(self):
        user = self.cleaned_data["user"]
        if not user.is_active:
            raise forms.ValidationError("this user is inactive")
        if not may_issue_for(self.acting, user):
            raise forms.ValidationError("a token for another staff account acts as it: only a superuser may issue one")
        return user


class TokenStateFilter(admin.SimpleListFilter):
    """Active, revoked or expired: the token's state as the list says it."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked"), ("expired", "expired")]

    def queryset(self, request, queryset):
        now = timezone.now()
        live = Q(revoked_at__isnull=True)
        if self.value() == "active":
            return queryset.filter(live & (Q(expires_at__isnull=True) | Q(expires_at__gt=now)))
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "expired":
            return queryset.filter(live & Q(expires_at__lte=now))
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(LightListAdmin):
    list_display = ("prefix_display", "user", "name", "scope", "state", "created_at", "expires_at", "last_used_at")
    list_filter = (TokenStateFilter, "scope")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    actions = ["revoke_tokens", "rotate_tokens"]
    readonly_fields = ("prefix_display", "user", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = type("ApiTokenAddFormFor", (ApiTokenAddForm,), {"acting": request.user})
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name", "scope", "days")
        return ("prefix_display", "user", "name", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False  # a token is revoked (api_token_revoke), and kept for the record

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj):
        return format_html("<code>{}…</code>", obj.prefix) if obj.prefix else "—"

    @admin.display(description="state")
    def state(self, obj):
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at and obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def save_model(self, request, obj, form, change):
        if change:
            before = ApiToken.objects.filter(pk=obj.pk).values_list("name", flat=True).first()
            with transaction.atomic():
                obj.save(update_fields=["name"])  # the one field offered: never write back the rest (a revoke meanwhile)
                if before != obj.name:
                    record(actor=request.user, action="token.rename", target=obj, before={"name": before}, after={"name": obj.name})
            return
        issued = api_token_create(
            user=form.cleaned_data["user"],
            read_only=form.cleaned_data["scope"] == TokenScope.READ_ONLY,
            days=form.cleaned_data.get("days"),
            name=form.cleaned_data.get("name") or "",
            created_by=request.user,
        )
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(issued.token, field.attname))
        obj._state.adding = False
        self.message_user(
            request,
            format_html(
                "Token for {}: <code>{}</code> — copy it now, it is stored only as a digest and will not be shown again.",
                obj.user,
                issued.secret,
            ),
            messages.WARNING,
        )

    @admin.action(description="Rotate the selected tokens (new secrets shown once, the old ones stop working)", permissions=["change"])
    def rotate_tokens(self, request, queryset):
        for token in queryset.select_related("user"):
            try:
                issued = api_token_rotate(token=token, actor=request.user)
            except (ValueError, PermissionDenied) as exc:
                self.message_user(request, f"Not rotated: {token}: {exc}", messages.ERROR)
                continue
            self.message_user(
                request,
                format_html(
                    "Rotated {} → <code class=\"console-secret\">{}</code> for {} — copy it now, it will not be shown again; {}… no longer works.",
                    token.prefix, issued.secret, token.user, token.prefix,
                ),
                messages.WARNING,
            )  # fmt: skip

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke_tokens(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token, actor=request.user)
            count += 1
        self.message_user(request, f"revoked {count} token(s)", messages.SUCCESS)


# --------------------------------------------------------------------------- sessions


class SessionChangeForm(forms.ModelForm):
    """Title, agent and status: each change goes through its service in ``save_model``."""

    agent = forms.ChoiceField(help_text="Its next run uses this agent's model, tools and prompt.")

    class Meta:
        model = AgentSession
        fields = ("title", "agent", "status")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        agents = list(Agent.objects.order_by("name").values_list("name", "enabled"))
        choices = [(name, name if enabled else f"{name} (disabled)") for name, enabled in agents]
        current = self.instance.agent
        if current not in {name for name, _ in agents}:
            choices.insert(0, (current, f"{current or '(none)'} — no such agent: the default agent answers"))
        self.fields["agent"].choices = choices

    def clean_title(self):
        title = self.cleaned_data.get("title") or ""
        if title == self.instance.title:
            return title
        try:
            return clean_title(title)
        except RuntimeInputError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_agent(self):
        name = self.cleaned_data["agent"]
        if name != self.instance.agent:
            try:
                agent_for_session_change(meta=self.instance, agent_name=name)
            except RuntimeInputError as exc:
                raise forms.ValidationError(str(exc)) from None
        return name


class LastActivityFilter(admin.DateFieldListFilter):
    title = "last activity"


@admin.register(AgentSession)
class ConsoleSessionAdmin(AgentSessionAdmin):
    """The kernel's session pages plus the console's writes, each through a runtime service:
    title → ``session_rename`` (a Pi ``session_info`` entry), agent → ``session_set_agent``,
    status → ``session_set_status``, delete → ``session_delete`` (file, rows, runs; refused
    while a run is active). Nothing here saves the row itself."""

    form = SessionChangeForm
    list_display = (
        "session_cell", "user", "agent", "provider", "leaf", "entries", "branches", "compactions", "run_state", "last_activity",
        "total_cost", "diagnostics_flag",
    )  # fmt: skip
    list_filter = ("provider", "status", "agent", ("updated_at", LastActivityFilter))
    readonly_fields = ("runs_table", *AgentSessionAdmin.readonly_fields, "user", "metadata")
    fields = ("title", "agent", "status", *readonly_fields)
    actions = ["delete_selected"]
    delete_template = "admin/sessions_tree/agentsession/delete_sessions.html"
    change_form_template = "admin/sessions_tree/agentsession/console_change_form.html"

    # --- addressed by session id ---------------------------------------------------

    def get_object(self, request, object_id, from_field=None):
        """``object_id`` is the session id (``/admin/sessions_tree/agentsession/<session id>/``);
        a numeric primary key still works for old links."""
        meta = self.get_queryset(request).filter(session_id=object_id).first()
        if meta is None and str(object_id).isdigit():
            meta = super().get_object(request, object_id, from_field)
        return meta

    def get_changelist(self, request, **kwargs):
        return SessionChangeList

    @admin.display(description="console")
    def console_links(self, obj):
        return format_html(
            '<a href="{}">Tree</a> · <a href="{}">Context at the leaf</a> · <a href="{}">Open in chat</a>',
            reverse("admin:sessions_tree_agentsession_tree", args=[obj.session_id]),
            reverse("admin:sessions_tree_agentsession_context", args=[obj.session_id]),
            reverse("pages:session", args=[obj.session_id]),
        )

    # --- the list: run state and cost in the rows' one query -----------------------

    def list_queryset(self, queryset):
        runs = AgentRun.objects.filter(session_id=OuterRef("session_id"))
        return super().list_queryset(queryset).annotate(
            listed_run_status=Subquery(runs.order_by("-created_at").values("status")[:1]),
            listed_cost=Subquery(runs.order_by().values("session_id").annotate(total=Sum("cost")).values("total")[:1]),
        )

    @admin.display(description="session", ordering="title")
    def session_cell(self, obj):
        # The title to read, the id to address it by (the link goes to /<session id>/).
        return format_html('<strong>{}</strong><br><code class="console-id">{}</code>', obj.title or "(untitled)", obj.session_id)

    @admin.display(description="diagnostics")
    def diagnostics_flag(self, obj):
        # Said when there are some; nothing (not a red ✗) when there are none.
        return mark_safe('<span class="pill pill-warn">yes</span>') if self.has_diagnostics(obj) else "—"

    @admin.display(description="leaf")
    def leaf(self, obj):
        return format_html("<code>{}</code>", obj.leaf_entry_id) if obj.leaf_entry_id else "(none)"

    @admin.display(description="entries", ordering="entry_count")
    def entries(self, obj):
        return obj.entry_count

    @admin.display(description="compactions", ordering="compaction_count")
    def compactions(self, obj):
        return obj.compaction_count

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, obj):
        return format_html('<span title="{}">{} ago</span>', obj.updated_at.isoformat(), timesince(obj.updated_at))

    @admin.display(description="run")
    def run_state(self, obj):
        status = getattr(obj, "listed_run_status", None)
        if status is None:
            return "—"
        return format_html('<span class="console-badge {}">{}</span>', status, status)

    @admin.display(description="cost $")
    def total_cost(self, obj):
        cost = getattr(obj, "listed_cost", None)
        return "—" if cost is None else f"{cost:.4f}"

    # --- the page: runs, subagent runs, actions ----------------------------------

    @admin.display(description="runs")
    def runs_table(self, obj):
        runs = list(
            AgentRun.objects.filter(session_id=obj.session_id).defer("prompt", "images", "error").select_related("user").order_by("-created_at")[:50]
        )
        children = list(
            SubprocessRun.objects.filter(session_id=obj.session_id).only(
                "run_id", "agent", "task_index", "status", "parent_run_id", "created_at"
            ).order_by("-created_at")[:50]
        )  # fmt: skip
        if not runs and not children:
            return "no runs"
        run_rows = format_html_join(
            "", '<tr><td><a href="{}"><code>{}</code></a></td><td><span class="console-badge {}">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (reverse("admin:runtime_agentrun_change", args=[r.pk]), str(r.run_id)[:8], r.status, r.status,
                 r.user or "—", r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.output_tokens, f"{r.cost:.4f}")
                for r in runs
            ),
        )  # fmt: skip
        child_rows = format_html_join(
            "", '<tr data-subagent-run="{}"><td><a href="{}"><code>{}</code></a></td><td><span class="console-badge {}">{}</span></td><td>{}</td><td>task {}</td><td colspan="2">{}</td></tr>',
            (
                (c.run_id, reverse("admin:runtime_subprocessrun_change", args=[c.pk]), str(c.run_id)[:8], c.status, c.status, c.agent,
                 c.task_index, c.created_at.strftime("%Y-%m-%d %H:%M:%S"))
                for c in children
            ),
        )  # fmt: skip
        return format_html(
            '<table class="console-table"><thead><tr><th>run</th><th>status</th><th>user / agent</th><th>created</th>'
            "<th>output tokens</th><th>cost $</th></tr></thead><tbody>{}</tbody></table>{}",
            run_rows,
            format_html('<h4>Subagent runs</h4><table class="console-table"><tbody>{}</tbody></table>', child_rows) if children else "",
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        mine = [
            path("<path:object_id>/rename/", wrap(self.rename_view), name="sessions_tree_agentsession_rename"),
            path("<path:object_id>/leaf/", wrap(self.leaf_view), name="sessions_tree_agentsession_leaf"),
            path("<path:object_id>/compact/", wrap(self.compact_view), name="sessions_tree_agentsession_compact"),
            path("<path:object_id>/fork/", wrap(self.fork_view), name="sessions_tree_agentsession_fork"),
            path("<path:object_id>/archive/", wrap(self.archive_view), name="sessions_tree_agentsession_archive"),
            path("<path:object_id>/abort/", wrap(self.abort_view), name="sessions_tree_agentsession_abort"),
        ]
        return [*mine, *super().get_urls()]

    def _writable(self, request, object_id) -> AgentSession:
        if request.method != "POST":
            raise PermissionDenied  # actions change things: POST only (the page's buttons)
        meta = self.get_object(request, object_id)
        if meta is None:
            raise Http404("no such session")
        if not self.has_change_permission(request, meta):
            raise PermissionDenied
        return meta

    def _done(self, request, meta, text: str, level=messages.SUCCESS):
        self.message_user(request, text, level)
        return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_change", args=[meta.session_id]))

    def _refused(self, request, meta, exc):
        return self._done(request, meta, f"Refused: {exc}", messages.ERROR)

    def rename_view(self, request, object_id):
        """The title, through ``session_rename`` (a Pi ``session_info`` entry; refused empty or too long)."""
        meta = self._writable(request, object_id)
        try:
            session_rename(session_id=meta.session_id, title=clean_title(request.POST.get("title") or ""), actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        meta.refresh_from_db()
        return self._done(request, meta, f"Renamed: {meta.title}")

    def leaf_view(self, request, object_id):
        """Move the leaf to an entry (empty: before the first entry), through ``session_switch_leaf``."""
        meta = self._writable(request, object_id)
        entry_id = (request.POST.get("entry_id") or "").strip() or None
        try:
            result = session_switch_leaf(session_id=meta.session_id, entry_id=entry_id, actor=request.user, summarize=request.POST.get("summarize") == "on")
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, f"The leaf is now {result.get('leafId') or 'before the first entry'}.")

    def compact_view(self, request, object_id):
        meta = self._writable(request, object_id)
        try:
            session_compact(session_id=meta.session_id, actor=request.user, instructions=request.POST.get("instructions") or None)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, "Compacted: a compaction entry now summarizes the older part of the path.")

    def fork_view(self, request, object_id):
        meta = self._writable(request, object_id)
        entry_id = (request.POST.get("entry_id") or "").strip() or meta.leaf_entry_id
        try:
            fork = session_fork(session_id=meta.session_id, entry_id=entry_id or "", actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, fork, f"Forked at {entry_id}: this is the new session (owned by you).")

    def archive_view(self, request, object_id):
        meta = self._writable(request, object_id)
        status = "active" if meta.status == "archived" else "archived"
        try:
            session_set_status(session_id=meta.session_id, status=status, actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, f"The session is {status}.")

    def abort_view(self, request, object_id):
        meta = self._writable(request, object_id)
        if not request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun"):
            raise PermissionDenied
        run = run_abort(session_id=meta.session_id, actor=request.user)
        return self._done(request, meta, "No run was active." if run is None else f"Asked run {run.run_id} to stop ({run.status}).")

    def context_view(self, request, object_id: str):
        response = super().context_view(request, object_id)
        if isinstance(response, TemplateResponse) and self.has_change_permission(request, response.context_data.get("original")):
            response.context_data["leaf_action_url"] = reverse("admin:sessions_tree_agentsession_leaf", args=[response.context_data["original"].session_id])
        return response

    def has_change_permission(self, request, obj=None):
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    # --- change ------------------------------------------------------------------

    @csrf_protect_m
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Not inside Django's request-wide transaction: each service runs its own, taking the
        # store's lock before the row's (on SQLite an outer transaction would hold the
        # database's write lock while waiting for the file's).
        if object_id is not None:
            meta = self.get_object(request, object_id)
            if meta is not None:
                run = active_run(meta.session_id)
                extra_context = {
                    **(extra_context or {}), "active_run": run, "session_meta": meta, "title": "Session",
                    "can_abort": request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun"),
                    # The live tree (static/console/session_live.js): the chat page's socket, read-only here.
                    "live_data": {
                        "sessionId": meta.session_id, "socket": f"/ws/sessions/{meta.session_id}/",
                        "heartbeatSeconds": settings.NETA_WS_HEARTBEAT_SECONDS,
                    },
                }  # fmt: skip
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        sid = obj.session_id
        writes = {
            "title": lambda value: session_rename(session_id=sid, title=value, actor=request.user),
            "agent": lambda value: session_set_agent(session_id=sid, agent_name=value, actor=request.user),
            "status": lambda value: session_set_status(session_id=sid, status=value, actor=request.user),
        }
        try:
            for field in form.changed_data:
                writes[field](form.cleaned_data[field])
        except (SessionTreeError, RuntimeInputError) as exc:
            request._console_refused = True
            self.message_user(request, f"Not saved: {exc}", messages.ERROR)
        try:
            obj.refresh_from_db()  # what the services stored (the title as the session_info entry set it)
        except AgentSession.DoesNotExist:
            request._console_refused = True

    def log_change(self, request, obj, message):
        if not getattr(request, "_console_refused", False):
            return super().log_change(request, obj, message)

    def save_related(self, request, form, formsets, change):
        pass  # no relations are edited here

    def response_change(self, request, obj):
        if getattr(request, "_console_refused", False):
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    # --- delete ------------------------------------------------------------------

    def delete_model(self, request, obj):
        session_delete(session_id=obj.session_id, actor=request.user)

    def delete_queryset(self, request, queryset):
        for meta in queryset:
            session_delete(session_id=meta.session_id, actor=request.user)

    def _confirm_delete(self, request, sessions, *, action: bool):
        summaries = []
        for meta in sessions:
            try:
                summaries.append(session_deletion_summary(session_id=meta.session_id))
            except SessionNotFound:
                continue
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Delete sessions" if len(summaries) != 1 else f"Delete {summaries[0]['session']}",
            "summaries": summaries,
            "deletable": [s for s in summaries if s["active_run"] is None],
            "action": action,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, self.delete_template, context)

    def _delete(self, request, sessions) -> list:
        """``session_delete`` each session; report what went and what was refused, and why."""
        deleted, busy = [], []
        for meta in sessions:
            try:
                session_delete(session_id=meta.session_id, actor=request.user)
            except SessionBusy:
                busy.append(meta)
            except SessionNotFound:
                continue  # gone meanwhile
            except (SessionTreeError, OSError) as exc:  # e.g. its file was removed by hand
                self.message_user(request, f"Not deleted: {meta}: {exc}", messages.ERROR)
            else:
                deleted.append(meta)
        if deleted:
            self.log_deletions(request, deleted)
            self.message_user(request, f"Deleted {len(deleted)} session(s) with their entries and runs.", messages.SUCCESS)
        if busy:
            names = ", ".join(str(m) for m in busy)
            self.message_user(request, f"Not deleted, a run is active (abort it first): {names}.", messages.ERROR)
        return deleted

    @csrf_protect_m
    def delete_view(self, request, object_id, extra_context=None):
        meta = self.get_object(request, object_id)
        if meta is None:
            raise Http404("no such session")
        if not self.has_delete_permission(request, meta):
            raise PermissionDenied
        if request.method == "POST" and request.POST.get("post") == "yes":
            if self._delete(request, [meta]):
                return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_changelist"))
            return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_change", args=[meta.session_id]))
        return self._confirm_delete(request, [meta], action=False)

    @admin.action(description="Delete selected sessions (files, entries and runs)", permissions=["delete"])
    def delete_selected(self, request, queryset):
        sessions = list(queryset)
        if request.POST.get("post") == "yes":
            self._delete(request, sessions)
            return None  # back to the list
        return self._confirm_delete(request, sessions, action=True)


class SessionChangeList(LightChangeList):
    """A session's row links to its session id, not its primary key."""

    def url_for_result(self, result):
        return reverse("admin:sessions_tree_agentsession_change", args=[result.session_id], current_app=self.model_admin.admin_site.name)



# --------------------------------------------------------------------------- share links


@admin.register(SessionShare)
class SessionShareAdmin(ViewOnly, admin.ModelAdmin):
    """The chat page's read-only share links (docs/chat.md, "Share"): who shared what, when,
    how often it was opened; staff who may change sessions revoke them."""

    list_display = ("session_id", "title", "created_by", "created_at", "revoked_at", "views", "link")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("session__session_id", "title", "created_by__username")
    list_select_related = ("created_by",)
    readonly_fields = ("session", "leaf_entry_id", "title", "created_by", "created_at", "revoked_at", "views", "link")
    exclude = ("token",)
    actions = ["revoke_links"]

    @admin.display(description="link")
    def link(self, obj):
        if obj.revoked_at:
            return "revoked"
        return format_html('<a href="/share/{}/" target="_blank" rel="noopener">open</a>', obj.token)

    def has_revoke_permission(self, request):
        return request.user.has_perm("sessions_tree.change_agentsession")

    @admin.action(description="Revoke the selected share links", permissions=["revoke"])
    def revoke_links(self, request, queryset):
        count = 0
        for share in queryset.filter(revoked_at__isnull=True):
            share_revoke(share)
            record(actor=request.user, action="session.share_revoke", target=("sessions_tree.agentsession", share.session_id, share.title))
            count += 1
        self.message_user(request, f"revoked {count} share link(s)", messages.SUCCESS)
