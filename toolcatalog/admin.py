"""Staff console for tool governance: one ToolConfig row per tool."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from audit.admin_forms import ReadOnlyFieldErrorsForm
from sessions_tree.admin_lists import LightListAdmin
from toolcatalog import services
from toolcatalog.models import McpServer, ToolConfig
from toolcatalog.protocol import UnknownTool, all_tools, get_tool


class ToolConfigForm(forms.ModelForm):
    class Meta:
        model = ToolConfig
        fields = [
            "name",
            "enabled",
            "label_override",
            "description_override",
            "prompt_hint",
            "allow_in_subagent",
            "worker_routing",
            "renderer_key",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "name" in self.fields:
            names = [t.name for t in all_tools()]
            self.fields["name"] = forms.ChoiceField(choices=[(n, n) for n in names])


@admin.register(ToolConfig)
class ToolConfigAdmin(LightListAdmin):
    form = ToolConfigForm
    list_display = ("name", "enabled", "allow_in_subagent", "route", "label_override", "registered", "updated_at")
    list_filter = ("enabled", "allow_in_subagent", "worker_routing")
    search_fields = ("name", "label_override")
    readonly_fields = ("manifest_view", "updated_by", "updated_at")
    actions = ("enable_tools", "disable_tools")
    change_list_template = "admin/toolcatalog/toolconfig/change_list.html"

    def has_delete_permission(self, request, obj=None):
        return False  # governance changes through tool_config_update (a row can be set back to the defaults)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return fields + ["name"] if obj is not None else fields

    @admin.display(description=_("route"))
    def route(self, obj: ToolConfig) -> str:
        return obj.worker_routing or "(manifest)"

    @admin.display(boolean=True, description=_("registered"))
    def registered(self, obj: ToolConfig) -> bool:
        try:
            get_tool(obj.name)
            return True
        except UnknownTool:
            return False

    @admin.display(description=_("manifest"))
    def manifest_view(self, obj: ToolConfig) -> str:
        try:
            tool = get_tool(obj.name)
        except UnknownTool:
            return "(no such tool registered)"
        data = {"manifest": tool.manifest.to_dict(), "parameters": tool.parameters}
        return format_html("<details><summary>show</summary><pre>{}</pre></details>", json.dumps(data, indent=2))

    def save_model(self, request, obj, form, change):
        changes = {k: form.cleaned_data[k] for k in form.cleaned_data if k != "name"}
        saved = services.tool_config_update(actor=request.user, name=obj.name, **changes)
        obj.pk = saved.pk

    @admin.action(description=_("Enable selected tools"), permissions=["change"])
    def enable_tools(self, request, queryset):
        for row in queryset:
            services.tool_config_update(actor=request.user, name=row.name, enabled=True)
        self.message_user(request, _("Enabled %(queryset_count)s tool(s).") % {"queryset_count": queryset.count()}, messages.SUCCESS)

    @admin.action(description=_("Disable selected tools"), permissions=["change"])
    def disable_tools(self, request, queryset):
        for row in queryset:
            services.tool_config_update(actor=request.user, name=row.name, enabled=False)
        self.message_user(request, _("Disabled %(queryset_count)s tool(s).") % {"queryset_count": queryset.count()}, messages.SUCCESS)

    def get_urls(self):
        urls = [
            path(
                "sync/",
                self.admin_site.admin_view(self.sync_view),
                name="toolcatalog_toolconfig_sync",
            )
        ]
        return urls + super().get_urls()

    def sync_view(self, request):
        if request.method != "POST" or not self.has_add_permission(request):
            return HttpResponseRedirect(reverse("admin:toolcatalog_toolconfig_changelist"))
        created = services.tool_config_sync(actor=request.user)
        self.message_user(request, _("Created rows for %(len_created)s tool(s).") % {"len_created": len(created)}, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:toolcatalog_toolconfig_changelist"))


@admin.register(McpServer)
class McpServerAdmin(LightListAdmin):
    """The raw rows; the console's MCP pages (``console/mcp/``) are the everyday editor.
    Saves and deletes go through the services (audit, catalog version, connections)."""

    form = ReadOnlyFieldErrorsForm
    list_display = ("name", "transport", "enabled", "agents", "tool_count", "restarts", "last_error_short", "updated_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    readonly_fields = ("tools_view", "tools_listed_at", "last_error", "last_error_at", "restarts", "updated_by", "updated_at")
    fields = (
        "name", "transport", "command", "args", "url", "env_names", "enabled", "connect_timeout", "call_timeout",
        "agents", "network", "read_only_paths",
    ) + readonly_fields

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields.append("name")
        if not services.may_run_commands(request.user) and (obj is None or obj.transport == McpServer.STDIO):
            # What a stdio server runs is a superuser's choice (docs/security.md); a new server
            # without that right is a streamable-HTTP one (the service refuses the rest).
            fields += [f for f in services.MCP_COMMAND_FIELDS if f != "transport" or obj is not None]
        return fields

    @admin.display(description=_("tools"))
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tools or [])

    @admin.display(description=_("last error"))
    def last_error_short(self, obj: McpServer) -> str:
        return obj.last_error[:120]

    @admin.display(description=_("tools listed"))
    def tools_view(self, obj: McpServer) -> str:
        return format_html("<details><summary>{} tool(s)</summary><pre>{}</pre></details>", len(obj.tools or []), json.dumps(obj.tools, indent=2))

    def save_model(self, request, obj, form, change):
        changes = {k: form.cleaned_data[k] for k in services.MCP_SERVER_FIELDS if k in form.cleaned_data}
        saved = services.mcp_server_save(actor=request.user, name=obj.name, discover=False, **changes)
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        services.mcp_server_delete(actor=request.user, name=obj.name)

    def delete_queryset(self, request, queryset):
        for row in queryset:
            services.mcp_server_delete(actor=request.user, name=row.name)
