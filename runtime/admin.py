"""Agents, models, runs and integration tokens in the staff console."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from runtime.models import Agent, AgentRun, ApiToken, ModelConfig, RunInput, TokenScope
from runtime.services import run_abort
from runtime.tokens import MAX_TOKEN_DAYS, api_token_create, api_token_revoke


def _pretty(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


@admin.register(ModelConfig)
class ModelConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "display_name", "provider_kind", "model_id", "context_window", "enabled", "key_status")
    list_filter = ("provider_kind", "enabled")
    search_fields = ("name", "model_id", "display_name")
    readonly_fields = ("key_status", "created_at", "updated_at")

    @admin.display(description="API key")
    def key_status(self, obj):
        if obj.provider_kind == "scripted":
            return "not needed"
        if not obj.api_key_env:
            return "no variable named"
        # Only whether it is set: the value is never shown.
        return f"{obj.api_key_env} is set" if obj.key_is_set else f"{obj.api_key_env} is NOT set"


class RunInputInline(admin.TabularInline):
    model = RunInput
    extra = 0
    can_delete = False
    readonly_fields = ("kind", "text", "consumed", "created_at")
    fields = readonly_fields


def sandbox_line() -> str:
    """"sandbox: bwrap" or "sandbox: none — why" (the process's effective NETA_SANDBOX)."""
    from toolcatalog.sandbox import effective_sandbox

    return f"sandbox: {effective_sandbox().describe}"


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "session_provider", "workspace", "thinking_level", "max_tool_rounds", "enabled")
    list_filter = ("session_provider", "workspace_mode", "enabled", "model")
    list_select_related = ("model",)
    search_fields = ("name", "description")
    readonly_fields = (
        "workspace_layout", "sandbox", "effective_tools", "effective_skills", "system_prompt_preview", "created_at",
        "updated_at",
    )

    def _with_sandbox(self, extra_context):
        return {**(extra_context or {}), "subtitle": sandbox_line()}

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, self._with_sandbox(extra_context))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, self._with_sandbox(extra_context))

    @admin.display(description="workspace", ordering="workspace_mode")
    def workspace(self, obj):
        return "shared (deliberate)" if obj.workspace_mode == "shared" else obj.get_workspace_mode_display()

    @admin.display(description="where tools work")
    def workspace_layout(self, obj):
        from runtime.workspaces import workspace_layout

        return workspace_layout(obj)

    @admin.display(description="sandbox")
    def sandbox(self, obj):
        return sandbox_line()

    @admin.display(description="effective tools")
    def effective_tools(self, obj):
        from toolcatalog.policy import PolicyError
        from toolcatalog.projection import resolve_tools

        try:
            projection = resolve_tools(obj.tool_policy or {})
        except PolicyError as exc:
            return f"invalid tool policy: {exc}"
        rows = [
            f"{'✓' if d.effective else '✗'} {d.name} — {d.source}{': ' + d.reason if d.reason else ''}"
            for d in projection
        ]
        return format_html("<pre>{}</pre>", "\n".join(rows))

    @admin.display(description="effective skills")
    def effective_skills(self, obj):
        from skills_registry.policy import SkillPolicy, SkillPolicyError
        from skills_registry.selectors import skills_visibility_report

        try:
            policy = SkillPolicy.from_dict(obj.skill_policy or {})
        except SkillPolicyError as exc:
            return f"invalid skill policy: {exc}"
        rows = [
            f"{'✓' if row.visible else '✗'} {row.skill.name} ({row.skill.scope}, {row.skill.status}) — {row.reason}"
            for row in skills_visibility_report(policy=policy)
        ]
        return format_html("<pre>{}</pre>", "\n".join(rows) or "no skills registered (skills_sync)")

    @admin.display(description="system prompt (as a run would build it now)")
    def system_prompt_preview(self, obj):
        from toolcatalog.policy import PolicyError
        from toolcatalog.projection import resolve_tools

        from runtime.system_prompt import build_system_prompt
        from runtime.workspaces import preview_cwd

        if obj.pk is None:
            return "shown once the agent is saved"
        try:
            text = build_system_prompt(obj, resolve_tools(obj.tool_policy or {}), cwd=preview_cwd(obj))
        except (PolicyError, ValueError) as exc:
            return f"cannot build it: {exc}"
        return format_html("<pre style=\"white-space: pre-wrap\">{}</pre>", text)


@admin.register(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = ("run_id", "session_id", "agent", "status", "rounds", "output_tokens", "cost", "created_at", "worker")
    list_filter = ("status", "backend", "agent")
    search_fields = ("run_id", "session_id")
    list_select_related = ("agent",)
    show_full_result_count = False
    readonly_fields = [f.name for f in AgentRun._meta.fields]
    inlines = [RunInputInline]
    actions = ["abort_runs"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Abort the selected runs")
    def abort_runs(self, request, queryset):
        count = 0
        for run in queryset:
            if run.is_active:
                run_abort(run=run)
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

    def clean_user(self):
        user = self.cleaned_data["user"]
        if not user.is_active:
            raise forms.ValidationError("this user is inactive")
        return user


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix_display", "user", "name", "scope", "state", "created_at", "expires_at", "last_used_at")
    list_filter = ("scope", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    actions = ["revoke_tokens"]
    readonly_fields = ("prefix_display", "user", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name", "scope", "days")
        return ("prefix_display", "user", "name", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

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
            super().save_model(request, obj, form, change)
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

    @admin.action(description="Revoke the selected tokens")
    def revoke_tokens(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token)
            count += 1
        self.message_user(request, f"revoked {count} token(s)", messages.SUCCESS)
