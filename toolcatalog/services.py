"""Writes and actions of the tool catalog: governance rows, tool contexts, running a tool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.utils import timezone

from audit.services import changed_fields, record
from toolcatalog.mcp import catalog as mcp_catalog
from toolcatalog.mcp import connections as mcp_connections
from toolcatalog.mcp.specs import ServerSpec
from toolcatalog.models import McpServer, ToolConfig
from toolcatalog.policy import ToolPolicy
from toolcatalog.projection import ToolProjection, resolve_tools
from toolcatalog.protocol import (
    CallerSkillPolicy,
    CancelSignal,
    ToolContext,
    ToolResult,
    UnknownTool,
    all_tools,
    get_tool,
    refresh_registry,
    run_tool,
)

_CONFIG_FIELDS = (
    "enabled",
    "label_override",
    "description_override",
    "prompt_hint",
    "allow_in_subagent",
    "worker_routing",
    "renderer_key",
)


@transaction.atomic
def tool_config_update(*, actor, name: str, **changes: Any) -> ToolConfig:
    """Create or change the governance row of ``name``; validates like the admin does."""
    return _upsert_by_name(ToolConfig, _CONFIG_FIELDS, name, changes, actor=actor, action="tool.change")


def _upsert_by_name(model, allowed, name: str, changes: dict, *, actor, action: str, authorize=None):
    """Create or change the row of ``model`` named ``name`` (locked), validated like the admin
    (``full_clean``), with an audit record of what changed; call inside a transaction.
    ``authorize(row, before, created)`` may refuse (raise) once the changes are applied."""
    unknown = set(changes) - set(allowed)
    if unknown:
        raise TypeError(f"unknown {model.__name__} fields: {', '.join(sorted(unknown))}")
    row = model.objects.select_for_update().filter(name=name).first() or model(name=name)
    created = row.pk is None
    before = {key: getattr(row, key) for key in allowed}
    for key, value in changes.items():
        setattr(row, key, value)
    row.updated_by = actor if getattr(actor, "pk", None) else None
    if authorize is not None:
        authorize(row, before, created)
    row.full_clean()
    row.save()
    old, new = changed_fields(before, {key: getattr(row, key) for key in allowed})
    if new or created:
        record(actor=actor, action=action, target=(model._meta.label_lower, name, name), before=old, after=new)
    return row


@transaction.atomic
def tool_config_sync(*, actor=None) -> list[ToolConfig]:
    """Create default rows for registered tools that have none; returns the new rows."""
    refresh_registry()
    existing = set(ToolConfig.objects.values_list("name", flat=True))
    created = []
    for tool in all_tools():
        if tool.name not in existing:
            row = ToolConfig(name=tool.name, updated_by=actor if getattr(actor, "pk", None) else None)
            row.full_clean()
            row.save()
            created.append(row)
    return created


def tool_context_build(
    *,
    policy: ToolPolicy | Mapping[str, Any] | None,
    roots: Sequence[str | Path],
    cwd: str | Path | None = None,
    cancel: CancelSignal | None = None,
    on_progress: Callable[[ToolResult], None] | None = None,
    sandbox: str | None = None,
    output_dir: Path | None = None,
    skill_policy: CallerSkillPolicy | None = None,
    for_subagent: bool = False,
    extras: dict[str, Any] | None = None,
) -> ToolContext:
    """A context with the policy's env passthrough and network flag, the caller's skill policy
    and whether it is a subagent (raises ValueError on bad roots, TypeError on a bad field).

    The runtime builds every tool context of a run here, the parent's and a subagent's
    (``for_subagent=True``) alike; ``tool_execute`` then runs a call through the projection."""
    policy = policy if isinstance(policy, ToolPolicy) else ToolPolicy.from_dict(policy, unknown_tools="ignore")
    kwargs: dict[str, Any] = {
        "roots": tuple(roots),
        "cwd": cwd,
        "env_passthrough": policy.env_passthrough,
        "network": policy.network,
        "on_progress": on_progress,
        "output_dir": output_dir,
        "skill_policy": skill_policy,
        "for_subagent": for_subagent,
        "extras": dict(extras or {}),
    }
    if cancel is not None:
        kwargs["cancel"] = cancel
    if sandbox is not None:
        kwargs["sandbox"] = sandbox
    return ToolContext(**kwargs)


def tool_execute(*, name: str, args: Any, ctx: ToolContext, projection: ToolProjection) -> ToolResult:
    """Run ``name`` the way the runtime does: only if the projection makes it effective. Never raises."""
    decision = projection.get(name)
    if decision is None:
        return ToolResult.error(f"Unknown tool {name!r}")
    if not decision.effective:
        return ToolResult.error(f"Tool {name!r} is not available: {decision.reason}")
    try:
        tool = get_tool(name)
    except UnknownTool as exc:
        return ToolResult.error(str(exc))
    return run_tool(tool, ctx, args)


def tool_run_once(
    *,
    name: str,
    args: Any,
    roots: Sequence[str | Path],
    cwd: str | Path | None = None,
    policy: ToolPolicy | Mapping[str, Any] | None = None,
    sandbox: str | None = None,
    cancel: CancelSignal | None = None,
) -> tuple[ToolProjection, ToolResult]:
    """Resolve the projection for ``policy`` and run one tool in a fresh context (``tool_run``)."""
    projection = resolve_tools(policy)
    ctx = tool_context_build(policy=policy, roots=roots, cwd=cwd, sandbox=sandbox, cancel=cancel)
    return projection, tool_execute(name=name, args=args, ctx=ctx, projection=projection)


# --- MCP servers (docs/tools.md, "MCP tools") -----------------------------------------

MCP_SERVER_FIELDS = (
    "transport",
    "command",
    "args",
    "url",
    "env_names",
    "enabled",
    "connect_timeout",
    "call_timeout",
    "agents",
    "network",
    "read_only_paths",
)


@dataclass(frozen=True)
class McpRefresh:
    """What a refresh found: the tools listed, the ones that cannot be registered, or why it failed."""

    server: McpServer
    tools: list[str]
    skipped: list[str]
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


#: What a stdio server runs and with what: adding or changing any of it runs a command on the
#: server, a superuser's right (docs/security.md).
MCP_COMMAND_FIELDS = ("transport", "command", "args", "env_names", "read_only_paths", "network")


def may_run_commands(actor) -> bool:
    """May ``actor`` choose a command the server runs (a stdio MCP server)? Superusers, and the
    command line (no actor: whoever runs ``manage.py`` already runs code on the server)."""
    return actor is None or bool(getattr(actor, "is_superuser", False))


def _authorize_mcp_change(actor, server: McpServer, before: dict, created: bool) -> None:
    if may_run_commands(actor):
        return
    stdio = server.transport == McpServer.STDIO or (not created and before.get("transport") == McpServer.STDIO)
    if stdio and (created or any(before.get(key) != getattr(server, key) for key in MCP_COMMAND_FIELDS)):
        raise PermissionDenied(
            "adding or changing a stdio MCP server (its command, arguments, environment, paths or network) runs a command "
            "on the server: only a superuser may"
        )


def mcp_server_save(*, actor, name: str, discover: bool = True, **fields: Any) -> McpRefresh | McpServer:
    """Create or change the ``McpServer`` ``name`` (validated like the admin: ``ValidationError``),
    then, with ``discover``, list its tools (:func:`mcp_server_refresh`; the row is saved
    whether or not the server answers). Returns the refresh, or the row without ``discover``."""
    with transaction.atomic():
        server = _upsert_by_name(
            McpServer, MCP_SERVER_FIELDS, name, fields, actor=actor, action="mcp_server.change",
            authorize=lambda row, before, created: _authorize_mcp_change(actor, row, before, created),
        )
    if not server.enabled:
        mcp_connections.manager().stop(name)
    if not discover:
        return server
    return mcp_server_refresh(actor=actor, name=name)


def mcp_server_delete(*, actor, name: str) -> None:
    with transaction.atomic():
        server = McpServer.objects.select_for_update().filter(name=name).first()
        if server is None:
            raise McpServer.DoesNotExist(f"no MCP server named {name!r}")
        record(actor=actor, action="mcp_server.delete", target=(McpServer._meta.label_lower, name, name), before={"transport": server.transport}, after=None)
        server.delete()
    mcp_connections.manager().stop(name)


def mcp_server_refresh(*, actor, name: str) -> McpRefresh:
    """Connect to the server anew (in this process) and list its tools into the catalog.
    A server that cannot be reached keeps the tools it listed last; the error is recorded."""
    server = McpServer.objects.get(name=name)
    if not server.enabled:
        mcp_connections.manager().stop(name)
        return McpRefresh(server=server, tools=[], skipped=[], error="the server is disabled")
    spec = ServerSpec.from_row(server)
    try:
        listed = mcp_connections.manager().list_tools(spec, fresh=True)
    except mcp_connections.McpUnavailable as exc:
        _mcp_error(name, str(exc))
        server.refresh_from_db()
        return McpRefresh(server=server, tools=[], skipped=[], error=str(exc))
    server, usable, skipped = mcp_tools_record(name=name, listed=listed)
    if actor is not None and getattr(actor, "pk", None):
        record(actor=actor, action="mcp_server.refresh", target=(McpServer._meta.label_lower, name, name), after={"tools": [t["name"] for t in usable]})
    return McpRefresh(server=server, tools=[mcp_catalog.catalog_name(name, t["name"]) for t in usable], skipped=skipped)


def mcp_tools_record(*, name: str, listed: list[dict[str, Any]]) -> tuple[McpServer, list[dict], list[str]]:
    """What the server listed, onto its row (a new catalog version when the tools changed),
    into this process's registry, with a governance row for each new tool."""
    spec_row = McpServer.objects.filter(name=name).first()
    if spec_row is None:
        raise McpServer.DoesNotExist(f"no MCP server named {name!r}")
    usable, skipped = mcp_catalog.usable_tools(ServerSpec.from_row(spec_row), listed)
    now = timezone.now()
    with transaction.atomic():
        server = McpServer.objects.select_for_update().get(name=name)
        if server.tools != listed:
            server.tools = listed
            server.tools_listed_at = now
            server.save(update_fields=["tools", "tools_listed_at"])  # bumps the catalog version
        else:
            McpServer.objects.filter(pk=server.pk).update(tools_listed_at=now)
            server.tools_listed_at = now
    refresh_registry()
    _mcp_governance_rows([mcp_catalog.catalog_name(name, t["name"]) for t in usable])
    return server, usable, skipped


@transaction.atomic
def _mcp_governance_rows(names: list[str]) -> None:
    """A default ``ToolConfig`` row for each of a server's tools that has none (like the
    builtins' *Add rows* button, for these tools only; staff edit them on the tool pages)."""
    existing = set(ToolConfig.objects.filter(name__in=names).values_list("name", flat=True))
    for tool_name in names:
        if tool_name not in existing:
            row = ToolConfig(name=tool_name)
            row.full_clean()
            row.save()


def _mcp_error(name: str, message: str, *, restarts: int | None = None) -> None:
    # Not a catalog change: written around the signals, so no new catalog version.
    changes: dict[str, Any] = {"last_error": message[:4000], "last_error_at": timezone.now()}
    if restarts is not None:
        changes["restarts"] = F("restarts") + 1
    McpServer.objects.filter(name=name).update(**changes)


def mcp_event_record(server: str, kind: str, **data: Any) -> None:
    """The connection manager's events (run on its event thread): a connection's tools
    (at connect and after ``tools/list_changed``) and its errors, onto the row."""
    try:
        if kind in ("connected", "tools"):
            mcp_tools_record(name=server, listed=data.get("tools") or [])
        elif kind == "error":
            restarted = data.get("error", "").startswith("the server closed the connection")
            _mcp_error(server, data.get("error", ""), restarts=1 if restarted else None)
    except McpServer.DoesNotExist:
        pass
    finally:
        connection.close()


def mcp_servers_discover(*, actor=None) -> list[McpRefresh]:
    """Refresh every enabled server (start-up, ``manage.py mcp_refresh``)."""
    return [mcp_server_refresh(actor=actor, name=name) for name in McpServer.objects.filter(enabled=True).values_list("name", flat=True)]


def mcp_servers_discover_in_background(*, keep_connections: bool = True) -> threading.Thread:
    """:func:`mcp_servers_discover` on a daemon thread (the web server's and each Celery
    worker's start-up: a slow server never delays it, and ``ready()`` reads no row).
    ``keep_connections=False``: stop the servers afterwards (a Celery worker's parent
    process runs no tool; its forked children connect on their first call)."""
    def work() -> None:
        try:
            mcp_servers_discover()
            if not keep_connections:
                mcp_connections.reset_manager()
        except DatabaseError:
            pass  # not migrated yet: no server to start
        except Exception:  # noqa: BLE001 - logged; each server's error is on its row
            logging.getLogger(__name__).exception("MCP discovery at start-up failed")
        finally:
            connection.close()

    thread = threading.Thread(target=work, name="mcp-discovery", daemon=True)
    thread.start()
    return thread
