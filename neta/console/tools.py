"""Tools: the catalog from the registry, governance edits, and which agents get each tool and why.

The list is the registry's tools (never waiting for a sync), each with its governance row
if it has one. "Who gets it" is the effective projection of every agent, as the turn loop
builds it (``runtime.agents.tools.agent_tool_projection``), for the agent and for it as a
subagent; nothing here re-derives a decision. Edits go through ``tool_config_update``.
"""

from __future__ import annotations

import os

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from runtime.agents.tools import agent_tool_projection
from runtime.models import Agent
from toolcatalog.models import ToolConfig
from toolcatalog.policy import PolicyError
from toolcatalog.projection import governance_rules
from toolcatalog.protocol import UnknownTool, all_tools, get_tool, refresh_registry
from toolcatalog.renderers import renderer_keys
from toolcatalog.services import tool_config_update

CONFIG_PERM = "toolcatalog.change_toolconfig"


def _agents():
    # Only what the projection reads: the policies (small JSON), the name, and whether the model takes tools.
    return list(
        Agent.objects.select_related("model")
        .only("name", "enabled", "tool_policy", "subagent_policy", "model__name", "model__supports_tools")
        .order_by("name")
    )


def who_gets(agents, governance) -> dict[str, dict]:
    """For each tool name: per agent, its decision as the agent and as a subagent."""
    table: dict[str, dict] = {t.name: {"agents": [], "main": 0, "sub": 0} for t in all_tools()}
    for agent in agents:
        try:
            main = agent_tool_projection(agent, governance=governance)
            sub = agent_tool_projection(agent, for_subagent=True, governance=governance)
        except PolicyError as exc:
            for row in table.values():
                row["agents"].append({"agent": agent, "error": str(exc)})
            continue
        for decision in main:
            row = table.setdefault(decision.name, {"agents": [], "main": 0, "sub": 0})
            as_sub = sub.get(decision.name)
            row["agents"].append({"agent": agent, "main": decision, "sub": as_sub})
            row["main"] += bool(decision.effective and agent.enabled)
            row["sub"] += bool(as_sub is not None and as_sub.effective and agent.enabled)
    return table


def tool_list(request):
    governance = governance_rules()  # also brings the MCP servers' tools into the registry
    rows_by_name = {row.name: row for row in ToolConfig.objects.only("name", "enabled", "allow_in_subagent", "worker_routing", "renderer_key")}
    usage = who_gets(_agents(), governance)
    tools = [
        {"tool": tool, "manifest": tool.manifest, "config": rows_by_name.get(tool.name), "usage": usage.get(tool.name)}
        for tool in sorted(all_tools(), key=lambda t: t.name)
    ]
    unknown = sorted(set(rows_by_name) - {t.name for t in all_tools()})
    context = {
        **admin.site.each_context(request),
        "title": _("Tools"),
        "subtitle": None,
        "tools": tools,
        "unknown_rows": unknown,
        "can_change": request.user.has_perm(CONFIG_PERM),
    }
    return TemplateResponse(request, "console/tools.html", context)


class GovernanceForm(forms.ModelForm):
    class Meta:
        model = ToolConfig
        fields = ["enabled", "allow_in_subagent", "worker_routing", "label_override", "description_override", "prompt_hint", "renderer_key"]
        widgets = {"description_override": forms.Textarea(attrs={"rows": 3}), "prompt_hint": forms.Textarea(attrs={"rows": 3})}


def tool_detail(request, name: str):
    refresh_registry()  # an MCP server's tool this process has not registered yet
    try:
        tool = get_tool(name)
    except UnknownTool:
        raise Http404(_("no tool named “%(name)s” is registered") % {"name": name}) from None
    config = ToolConfig.objects.filter(name=name).first() or ToolConfig(name=name)
    can_change = request.user.has_perm(CONFIG_PERM)
    form = GovernanceForm(instance=config)
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied
        form = GovernanceForm(request.POST, instance=ToolConfig(name=name))
        if form.is_valid():
            changes = {field: form.cleaned_data[field] for field in form.Meta.fields}
            try:
                tool_config_update(actor=request.user, name=name, **changes)
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, _("Saved the governance of %(name)s.") % {"name": name})
                return HttpResponseRedirect(reverse("admin:console_tool", args=[name]))
    governance = governance_rules()
    usage = who_gets(_agents(), governance).get(name)
    context = {
        **admin.site.each_context(request),
        "title": _("Tool %(name)s") % {"name": name},
        "subtitle": None,
        "tool": tool,
        "manifest": tool.manifest,
        "config": config if config.pk else None,
        "usage": usage,
        "form": form,
        "can_change": can_change,
        "renderer_keys": sorted(renderer_keys()),
        "unavailable": tool.unavailable_reason(),
        "tool_settings": tool_settings(tool),
    }
    return TemplateResponse(request, "console/tool_detail.html", context)


def tool_settings(tool) -> list[dict]:
    """The settings that configure ``tool``, as this process reads them: a key variable's name
    and whether it is set (never its value)."""
    rows = []
    for name in tool.settings_names:
        value = getattr(settings, name, None)
        row = {"name": name, "value": ", ".join(value) if isinstance(value, (list, tuple)) else ("" if value is None else str(value))}
        if name.endswith("_KEY_ENV") and value:
            row["key_set"] = bool(os.environ.get(value))
        rows.append(row)
    return rows
