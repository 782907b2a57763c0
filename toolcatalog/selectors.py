"""Reads of the tool catalog: governance rules and the catalog as pages show it."""

from __future__ import annotations

from typing import Any

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
