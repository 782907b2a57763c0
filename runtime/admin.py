"""Agents, models and runs in the staff console."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html

from runtime.models import Agent, AgentRun, ModelConfig, RunInput
from runtime.services import run_abort


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


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "session_provider", "thinking_level", "max_tool_rounds", "enabled")
    list_filter = ("session_provider", "enabled", "model")
    list_select_related = ("model",)
    search_fields = ("name", "description")
    readonly_fields = ("effective_tools", "created_at", "updated_at")

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
