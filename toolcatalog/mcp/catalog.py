"""MCP tools in the catalog: the ``McpTool`` class and this process's registry entries.

Discovery (``toolcatalog.services.mcp_server_refresh`` and the connection manager's
events) writes what a server listed onto its ``McpServer`` row and bumps the catalog's
version. Every process turns the enabled rows into registered tools here
(:func:`sync_registry`, hooked into the registry's refresh, so the projection, the policy
validation and the console all see them) — at most one query per catalog version, none
in a run that knows the version. A tool is registered as ``mcp__<server>__<tool>`` with
the server's JSON schema; its manifest is kind ``mcp``, not runnable in a worker (a
subagent reaches it through the main-process proxy), and ``audience`` is the server's
agent list (``["*"]``: every agent; empty: none), so the projection blocks every other agent
with a reason. A subagent gets an MCP tool only when its agent's policy enables it by name.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError

from toolcatalog import catalog_version
from toolcatalog.manifest import ToolManifest
from toolcatalog.mcp.specs import ALL_AGENTS, ServerSpec
from toolcatalog.protocol import Tool, ToolCancelled, ToolContext, ToolError, ToolResult, register_tool, unregister_tool

PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
MAX_NAME = 64

STDIO_MANIFEST = ToolManifest(kind="mcp", execution_mode="subprocess", supported_in_worker=False, default_route="main-process-proxy")
HTTP_MANIFEST = ToolManifest(kind="mcp", execution_mode="in-process", supported_in_worker=False, default_route="main-process-proxy")
EMPTY_SCHEMA = {"type": "object", "properties": {}}


def catalog_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``: the tool's name lowercased, other characters as ``_``
    (the registry's and the LLM APIs' alphabet)."""
    return f"{PREFIX}{server}__{_UNSAFE.sub('_', tool.lower())}"


class McpTool(Tool):
    """One tool of one MCP server; ``execute`` calls it through this process's manager."""

    def __init__(self, spec: ServerSpec, listed: dict[str, Any], *, agents: tuple[str, ...]) -> None:
        self.spec = spec
        self.remote_name = listed["name"]
        self.name = catalog_name(spec.name, self.remote_name)
        self.label = listed.get("title") or self.remote_name
        description = (listed.get("description") or "").strip()
        self.description = f"{description}\n\n(MCP server '{spec.name}', tool '{self.remote_name}')".strip()
        schema = listed.get("inputSchema") or EMPTY_SCHEMA
        self.parameters = schema if isinstance(schema, dict) else EMPTY_SCHEMA
        self.manifest = STDIO_MANIFEST if spec.transport == "stdio" else HTTP_MANIFEST
        # The server's own word that the tool only reads (MCP's readOnlyHint annotation).
        annotations = listed.get("annotations") if isinstance(listed.get("annotations"), dict) else {}
        self.changes = annotations.get("readOnlyHint") is not True
        # ["*"]: every agent, chosen on purpose; an empty list: no agent (McpServer.agents).
        self.audience = None if ALL_AGENTS in agents else tuple(agents)
        self.audience_reason = (
            f"MCP server '{spec.name}' is open only to the agents {', '.join(agents)} (McpServer.agents)"
            if agents
            else f"MCP server '{spec.name}' is open to no agent yet (McpServer.agents: list the agents, or \"*\" for every agent)"
        )

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        from mcp.shared.exceptions import MCPError  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)

        from toolcatalog.mcp.connections import McpCallCancelled, McpUnavailable, manager  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it) (connections imports it)
        from toolcatalog.mcp.content import convert_result  # the mcp SDK loads with the first MCP server (a process that runs none never pays for it)

        try:
            result = manager().call(self.spec, self.remote_name, args, cancel=ctx.cancel)
        except McpCallCancelled:
            raise ToolCancelled(f"MCP tool {self.name!r} was cancelled (the server was sent notifications/cancelled)") from None
        except McpUnavailable as exc:
            raise ToolError(str(exc), details={"mcp": {"server": self.spec.name, "tool": self.remote_name}}) from None
        except MCPError as exc:
            raise ToolError(
                f"MCP server '{self.spec.name}' answered tool '{self.remote_name}' with an error: {exc.error.message} (code {exc.error.code})",
                details={"mcp": {"server": self.spec.name, "tool": self.remote_name, "code": exc.error.code}},
            ) from None
        return convert_result(result, server=self.spec.name, tool=self.remote_name)


def usable_tools(spec: ServerSpec, listed: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(tools that can be registered, why the others cannot): names over 64 characters,
    two tools that map to one name, an invalid JSON schema."""
    from jsonschema import Draft202012Validator, SchemaError  # jsonschema (~0.3 s) loads with the first schema checked

    usable, skipped, seen = [], [], set()
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            skipped.append("a tool without a name")
            continue
        name = catalog_name(spec.name, item["name"])
        if len(name) > MAX_NAME:
            skipped.append(f"{item['name']!r}: {name!r} is longer than {MAX_NAME} characters")
            continue
        if name in seen:
            skipped.append(f"{item['name']!r}: another tool of the server is also named {name!r}")
            continue
        schema = item.get("inputSchema") or EMPTY_SCHEMA
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            skipped.append(f"{item['name']!r}: invalid input schema ({exc.message})")
            continue
        seen.add(name)
        usable.append(item)
    return usable, skipped


_FIELDS = ("name", "transport", "command", "args", "url", "env_names", "connect_timeout", "call_timeout", "network", "read_only_paths", "agents", "tools")


def _read_rows() -> tuple[tuple[ServerSpec, tuple[str, ...], tuple], ...]:
    from toolcatalog.models import McpServer  # the catalog's rows: read when the registry refreshes, after the apps are ready

    rows = McpServer.objects.filter(enabled=True).order_by("name").values(*_FIELDS)
    out = []
    for row in rows:
        spec = ServerSpec.from_row(row)
        usable, _skipped = usable_tools(spec, row["tools"] or [])
        out.append((spec, tuple(row["agents"] or ()), tuple(_freeze(t) for t in usable)))
    return tuple(out)


def _freeze(value: Any) -> Any:
    return json.dumps(value, sort_keys=True)


_lock = threading.Lock()
_applied: tuple = ()
_registered: set[str] = set()


def sync_registry() -> None:
    """Make this process's registry hold exactly the enabled servers' usable tools."""
    global _applied

    try:
        rows = catalog_version.cached("mcp_servers", _read_rows)
    except (DatabaseError, SynchronousOnlyOperation, RuntimeError):
        # No table yet (before migrate), an async context, or a process (or test) that may
        # not read the database: the registry stays as it is.
        return
    with _lock:
        if rows == _applied:
            return

        wanted: dict[str, McpTool] = {}
        for spec, agents, tools in rows:
            for frozen in tools:
                tool = McpTool(spec, json.loads(frozen), agents=agents)
                wanted[tool.name] = tool
        for name in _registered - set(wanted):
            unregister_tool(name)
        for tool in wanted.values():
            register_tool(tool, replace=True)
        _registered.clear()
        _registered.update(wanted)
        _applied = rows


def forget() -> None:
    """Unregister every MCP tool of this process (tests)."""
    global _applied
    with _lock:
        for name in _registered:
            unregister_tool(name)
        _registered.clear()
        _applied = ()
