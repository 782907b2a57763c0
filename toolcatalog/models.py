"""Governance: one ``ToolConfig`` row per tool name, edited by staff in the admin."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from toolcatalog.environment import is_valid_env_name, key_names, tool_variable_reason
from toolcatalog.manifest import WORKER_ROUTES
from toolcatalog.mcp.specs import ALL_AGENTS
from toolcatalog.protected_paths import read_only_path_problem


class ToolConfig(models.Model):
    """Staff settings for one tool. No row means the defaults (enabled, manifest route)."""

    ROUTE_CHOICES = [("", "manifest default")] + [(r, r) for r in WORKER_ROUTES]

    name = models.CharField(max_length=64, unique=True, help_text=_("Registered tool name, e.g. 'bash'."), verbose_name=_("name"))
    enabled = models.BooleanField(default=True, help_text=_("Off: no agent gets this tool."), verbose_name=_("enabled"))
    label_override = models.CharField(max_length=200, blank=True, verbose_name=_("label override"))
    description_override = models.TextField(blank=True, help_text=_("Replaces the description the model sees."))
    prompt_hint = models.TextField(blank=True, help_text=_("Default hint for the system prompt; agents may override."))
    allow_in_subagent = models.BooleanField(default=True, verbose_name=_("allow in subagent"))
    worker_routing = models.CharField(max_length=32, blank=True, choices=ROUTE_CHOICES, verbose_name=_("worker routing"))
    renderer_key = models.CharField(max_length=64, blank=True, help_text=_("Which UI renderer shows its calls."))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        verbose_name = _("tool configuration")
        verbose_name_plural = _("tool configurations")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from toolcatalog.protocol import UnknownTool, get_tool, refresh_registry  # the registry holds the builtins only once the app is ready (apps.ready registers them)

        refresh_registry()
        try:
            tool = get_tool(self.name)
        except UnknownTool:
            raise ValidationError({"name": f"no tool named {self.name!r} is registered"}) from None
        if self.worker_routing and not tool.manifest.route_allowed(self.worker_routing):
            raise ValidationError({"worker_routing": f"{self.name!r} cannot run inside a worker process"})
        from toolcatalog.renderers import renderer_keys  # reads the chat page's key list (a file) on first use

        if self.renderer_key and self.renderer_key not in renderer_keys():
            raise ValidationError(
                {"renderer_key": f"no chat renderer {self.renderer_key!r}; one of {', '.join(sorted(renderer_keys()))}, or empty (the tool's own name, else the generic card)"}
            )


class CatalogVersion(models.Model):
    """One row (pk 1): a number bumped in the same transaction as every change to a
    ``ToolConfig`` row or a skill row (``toolcatalog.catalog_version``). A process keeps
    what it read of the catalog with the number it read it at, so a run that learns the
    number with its claim (one column of a query it makes anyway) reads no catalog row
    until it changes, in any process."""

    version = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("catalog version")
        verbose_name_plural = _("catalog versions")


MCP_SERVER_NAME = r"^[a-z0-9](?:[a-z0-9-]|_(?!_))*$"  # a slug without "__" (the tool names' separator)


class McpServer(models.Model):
    """An MCP server staff configured (docs/tools.md, "MCP tools"). Its tools join the
    catalog as ``mcp__<name>__<tool>``. Environment variables are stored by *name*; their
    values are read from the server process's environment when the MCP server starts, so
    no secret is ever in a row. ``tools`` is what the server listed last (name, title,
    description, input schema), written by discovery; every process builds its registry
    entries from it at the catalog's version."""

    STDIO = "stdio"
    HTTP = "http"
    TRANSPORTS = [(STDIO, "stdio (a command this server starts)"), (HTTP, "streamable HTTP (a URL)")]

    name = models.CharField(
        max_length=32,
        unique=True,
        validators=[RegexValidator(MCP_SERVER_NAME, "lowercase letters, digits, '-' and single '_' (no '__'), starting with a letter or digit")],
        help_text=_("Its tools are named mcp__<name>__<tool>."), verbose_name=_("name")
    )
    transport = models.CharField(max_length=8, choices=TRANSPORTS, default=STDIO, verbose_name=_("transport"))
    command = models.CharField(max_length=500, blank=True, help_text=_("stdio: the program (absolute path or a name on PATH)."))
    args = models.JSONField(default=list, blank=True, help_text=_("stdio: its arguments, a JSON list of strings."))
    url = models.URLField(max_length=500, blank=True, help_text=_("streamable HTTP: the endpoint, e.g. http://127.0.0.1:9000/mcp"))
    env_names = models.JSONField(
        default=list, blank=True, help_text=_("Names of environment variables handed to the server (values come from Neta's own environment at start; never stored).")
    )
    enabled = models.BooleanField(default=True, help_text=_("Off: not started, its tools leave the catalog."), verbose_name=_("enabled"))
    connect_timeout = models.FloatField(default=10.0, help_text=_("Seconds to start (or reach) the server and list its tools."))
    call_timeout = models.FloatField(default=60.0, help_text=_("Seconds one tool call may take."))
    agents = models.JSONField(
        default=list, blank=True, help_text=_('Agent names that may use its tools, or ["*"] for every agent; empty: no agent.'), verbose_name=_("agents")
    )
    network = models.BooleanField(default=False, help_text=_("stdio under NETA_SANDBOX=bwrap: allow network access."))
    read_only_paths = models.JSONField(
        default=list, blank=True, help_text=_("stdio under NETA_SANDBOX=bwrap: extra paths visible read-only (the server's install directory).")
    )
    tools = models.JSONField(default=list, blank=True, editable=False, help_text=_("What the server listed last (written by discovery)."))
    tools_listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    restarts = models.PositiveIntegerField(default=0, editable=False, help_text=_("Connections that ended without being asked to (crashes), in any process."), verbose_name=_("restarts"))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        verbose_name = _("MCP server")
        verbose_name_plural = _("MCP servers")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.transport == self.STDIO:
            if not self.command.strip():
                errors["command"] = "a stdio server needs a command"
            if self.url:
                errors["url"] = "a stdio server has no URL"
        elif self.transport == self.HTTP:
            if not self.url:
                errors["url"] = "a streamable HTTP server needs a URL"
            if self.command or self.args:
                errors["command"] = "an HTTP server has no command or arguments"
        for field in ("args", "read_only_paths"):
            value = getattr(self, field)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                errors[field] = "must be a JSON list of strings"
        if "read_only_paths" not in errors:
            problems = [problem for p in self.read_only_paths if (problem := read_only_path_problem(p))]
            if problems:
                errors["read_only_paths"] = "; ".join(problems)
        names = self.env_names
        if not isinstance(names, list) or not all(isinstance(n, str) and is_valid_env_name(n) for n in names):
            errors["env_names"] = "must be a JSON list of environment variable names (A-Z, 0-9, _), never values"
        else:
            keys = key_names()
            refused = [reason for n in names if (reason := tool_variable_reason(n, keys=keys))]
            if refused:
                errors["env_names"] = "; ".join(refused)
        agents = self.agents
        if not isinstance(agents, list) or not all(isinstance(a, str) and a for a in agents):
            errors["agents"] = 'must be a JSON list of agent names, or ["*"] for every agent'
        elif ALL_AGENTS in agents and len(agents) > 1:
            errors["agents"] = '"*" (every agent) stands alone'
        if self.transport == self.HTTP and self.url and "url" not in errors:
            problem = http_url_problem(self.url)
            if problem:
                errors["url"] = problem
        for field in ("connect_timeout", "call_timeout"):
            value = getattr(self, field)
            if value is None or not (0 < value <= 3600):
                errors[field] = "must be between 0 and 3600 seconds"
        if errors:
            raise ValidationError(errors)

    def allows_agent(self, agent_name: str | None) -> bool:
        return ALL_AGENTS in (self.agents or []) or (agent_name is not None and agent_name in (self.agents or []))


def http_url_problem(url: str) -> str | None:
    """Why a streamable-HTTP MCP server may not be at ``url`` (``None``: it may): the web tools'
    guard (no loopback, private, link-local or metadata address, the deny list) unless
    ``NETA_MCP_HTTP_ALLOW`` names the host (or ``host:port``)."""
    from toolcatalog import web_guard  # resolves the host: loaded when a URL is checked

    policy = web_guard.policy_from_settings()
    allowed = web_guard.parse_rules(getattr(settings, "NETA_MCP_HTTP_ALLOW", []) or [], allow_ranges=False, setting="NETA_MCP_HTTP_ALLOW")
    policy = type(policy)(allow=(*policy.allow, *allowed), deny=policy.deny, limits=policy.limits)
    try:
        web_guard.check_url(url, policy)
    except (web_guard.WebRefused, web_guard.WebFetchError) as exc:
        return f"{exc} (an MCP server on such an address must be listed in NETA_MCP_HTTP_ALLOW)"
    return None
