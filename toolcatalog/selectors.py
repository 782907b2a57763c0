"""Reads of the tool catalog: governance rules and the catalog as pages show it."""

from __future__ import annotations

from typing import Any

from toolcatalog.mcp.connections import manager
from toolcatalog.models import McpServer
from toolcatalog.projection import governance_rules
from toolcatalog.protocol import all_tools

__all__ = ["governance_rules", "tool_catalog"]  # governance_rules: the projection's own read of the rows


def tool_catalog() -> list[dict[str, Any]]:
    """Every registered tool with its manifest, parameters and governance row (if any)."""
    rules = governance_rules()
    out = []
    for tool in all_tools():
        rule = rules.get(tool.name)
        out.append(
            {
                "name": tool.name,
                "label": tool.label,
                "description": tool.description,
                "parameters": tool.parameters,
                "manifest": tool.manifest.to_dict(),
                "governance": rule.to_dict() if rule else None,
            }
        )
    return out


def mcp_server_states() -> list[dict[str, Any]]:
    """Every ``McpServer`` with what the rows say (tools listed, last error, restarts in any
    process) and what *this* process's connection manager knows (connected or not)."""
    live = manager().states()
    out = []
    for row in McpServer.objects.order_by("name"):
        recovered = bool(row.last_error) and row.tools_listed_at is not None and row.last_error_at is not None and row.tools_listed_at >= row.last_error_at
        problem = bool(row.enabled and row.last_error and not recovered)
        state = live.get(row.name) or {}
        out.append(
            {
                "name": row.name,
                "server": row,
                "enabled": row.enabled,
                "transport": row.transport,
                "target": row.url if row.transport == McpServer.HTTP else " ".join([row.command, *row.args]),
                "tools": len(row.tools or []),
                "toolNames": [t.get("name") for t in row.tools or []],
                "toolsListedAt": row.tools_listed_at.isoformat() if row.tools_listed_at else None,
                "lastError": row.last_error,
                "lastErrorAt": row.last_error_at.isoformat() if row.last_error_at else None,
                "restarts": row.restarts,
                "ok": not problem,
                "recovered": recovered,
                "connection": state.get("status", "not connected in this process"),
                "serverInfo": state.get("serverInfo", ""),
            }
        )
    return out
