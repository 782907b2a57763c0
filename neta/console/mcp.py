"""MCP servers: the list with each server's state, a server's page (its settings, tools and
state) and the Refresh button — plain forms that work without JavaScript. Every write goes
through ``toolcatalog.services`` (``mcp_server_save``, ``mcp_server_refresh``); the tools a
server lists appear on the Tools pages like any other tool (docs/tools.md, "MCP tools")."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from toolcatalog.mcp.catalog import catalog_name
from toolcatalog.models import MCP_SERVER_NAME, McpServer
from toolcatalog.selectors import mcp_server_states
from toolcatalog.services import MCP_COMMAND_FIELDS, MCP_SERVER_FIELDS, may_run_commands, mcp_server_refresh, mcp_server_save

CHANGE_PERM = "toolcatalog.change_mcpserver"
ADD_PERM = "toolcatalog.add_mcpserver"
LIST_FIELDS = ("args", "env_names", "agents", "read_only_paths")


class LinesField(forms.CharField):
    """A list of strings, one per line (blank lines dropped)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        if isinstance(value, list):  # a disabled field's initial value: already a list
            return [str(item) for item in value]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class McpServerForm(forms.Form):
    name = forms.RegexField(regex=MCP_SERVER_NAME, max_length=32, help_text=_("Its tools are named mcp__<name>__<tool>."))
    transport = forms.ChoiceField(choices=McpServer.TRANSPORTS)
    command = forms.CharField(required=False, max_length=500, help_text=_("stdio: the program (absolute path or a name on PATH)."))
    args = LinesField(required=False, help_text=_("stdio: one argument per line."))
    url = forms.CharField(required=False, max_length=500, help_text=_("streamable HTTP: the endpoint, e.g. http://127.0.0.1:9000/mcp"))
    env_names = LinesField(required=False, label=_("Environment variable names"), help_text=_("One NAME per line; the values come from Neta's environment when the server starts and are never stored."))
    enabled = forms.BooleanField(required=False, initial=True)
    connect_timeout = forms.FloatField(initial=10.0, help_text=_("Seconds to start or reach the server and list its tools."))
    call_timeout = forms.FloatField(initial=60.0, help_text=_("Seconds one tool call may take."))
    agents = LinesField(required=False, help_text=_("Agent names that may use its tools, one per line; * alone for every agent; empty: no agent."))
    network = forms.BooleanField(required=False, help_text=_("stdio under NETA_SANDBOX=bwrap: allow network access."))
    read_only_paths = LinesField(required=False, help_text=_("stdio under NETA_SANDBOX=bwrap: more paths visible read-only, one per line."))


def _initial(server: McpServer) -> dict:
    return {"name": server.name, **{field: getattr(server, field) for field in MCP_SERVER_FIELDS}}


def _report(request, refresh) -> None:
    if refresh.ok:
        note = f" Skipped: {'; '.join(refresh.skipped)}." if refresh.skipped else ""
        messages.success(request, _("%(refresh_server_name)s: %(len_refresh_tools)s tool(s) listed.%(note)s") % {"refresh_server_name": refresh.server.name, "len_refresh_tools": len(refresh.tools), "note": note})
    else:
        messages.error(request, _("%(refresh_server_name)s: %(refresh_error)s") % {"refresh_server_name": refresh.server.name, "refresh_error": refresh.error})


def mcp_list(request):
    context = {
        **admin.site.each_context(request),
        "title": _("MCP servers"),
        "subtitle": None,
        "servers": mcp_server_states(),
        "can_add": request.user.has_perm(ADD_PERM),
        "can_change": request.user.has_perm(CHANGE_PERM),
    }
    return TemplateResponse(request, "console/mcp_servers.html", context)


def mcp_detail(request, name: str | None = None):
    server = None
    if name is not None:
        server = McpServer.objects.filter(name=name).first()
        if server is None:
            raise Http404(_("no MCP server named “%(name)s”") % {"name": name})
    can_change = request.user.has_perm(CHANGE_PERM if server else ADD_PERM)
    runs_commands = may_run_commands(request.user)
    form = _form(None, server, runs_commands)
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied
        form = _form(request.POST, server, runs_commands)
        if form.is_valid():
            data = form.cleaned_data
            target = server.name if server else data["name"]
            if server is None and McpServer.objects.filter(name=target).exists():
                form.add_error("name", f"an MCP server named {target!r} exists")
            else:
                try:
                    refresh = mcp_server_save(actor=request.user, name=target, **{field: data[field] for field in MCP_SERVER_FIELDS})
                except ValidationError as exc:
                    for field, errors in exc.message_dict.items():
                        form.add_error(field if field in form.fields else None, errors)
                except PermissionDenied as exc:
                    form.add_error(None, str(exc))
                else:
                    messages.success(request, _("Saved the MCP server %(target)s.") % {"target": target})
                    if hasattr(refresh, "ok"):
                        _report(request, refresh)
                    return HttpResponseRedirect(reverse("admin:console_mcp_server", args=[target]))
    state = next((s for s in mcp_server_states() if server and s["name"] == server.name), None)
    tools = [{"listed": t, "name": catalog_name(server.name, t["name"])} for t in (server.tools if server else [])]
    context = {
        **admin.site.each_context(request),
        "title": f"MCP server {server.name}" if server else "Add an MCP server",
        "subtitle": None,
        "server": server,
        "state": state,
        "tools": tools,
        "form": form,
        "can_change": can_change,
        "runs_commands": runs_commands,
    }
    return TemplateResponse(request, "console/mcp_server.html", context)


def _form(data, server: McpServer | None, runs_commands: bool) -> McpServerForm:
    """The server's form. Without the right to run commands, what a stdio server runs is shown,
    not editable (a new server can only be a streamable-HTTP one)."""
    form = McpServerForm(data, initial=_initial(server) if server else None)
    if server is not None:
        form.fields["name"].disabled = True
    if not runs_commands:
        if server is None:
            form.fields["transport"].choices = [c for c in McpServer.TRANSPORTS if c[0] == McpServer.HTTP]
            form.fields["transport"].initial = McpServer.HTTP
            for field in ("command", "args", "env_names", "read_only_paths", "network"):
                form.fields[field].disabled = True
        elif server.transport == McpServer.STDIO:
            for field in MCP_COMMAND_FIELDS:
                form.fields[field].disabled = True
    return form


def mcp_refresh(request, name: str):
    """POST: connect anew and list the server's tools (the Refresh button)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not request.user.has_perm(CHANGE_PERM):
        raise PermissionDenied
    if not McpServer.objects.filter(name=name).exists():
        raise Http404(_("no MCP server named “%(name)s”") % {"name": name})
    _report(request, mcp_server_refresh(actor=request.user, name=name))
    back = request.POST.get("next") or ""
    if back != "list":
        return HttpResponseRedirect(reverse("admin:console_mcp_server", args=[name]))
    return HttpResponseRedirect(reverse("admin:console_mcp"))
