"""Writes and actions of the tool catalog: governance rows, tool contexts, running a tool."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction

from audit.services import changed_fields, record
from toolcatalog.models import ToolConfig
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
    unknown = set(changes) - set(_CONFIG_FIELDS)
    if unknown:
        raise TypeError(f"unknown ToolConfig fields: {', '.join(sorted(unknown))}")
    config = ToolConfig.objects.select_for_update().filter(name=name).first() or ToolConfig(name=name)
    created = config.pk is None
    before = {key: getattr(config, key) for key in _CONFIG_FIELDS}
    for key, value in changes.items():
        setattr(config, key, value)
    config.updated_by = actor if getattr(actor, "pk", None) else None
    config.full_clean()
    config.save()
    old, new = changed_fields(before, {key: getattr(config, key) for key in _CONFIG_FIELDS})
    if new or created:
        record(actor=actor, action="tool.change", target=(ToolConfig._meta.label_lower, name, name), before=old, after=new)
    return config


@transaction.atomic
def tool_config_sync(*, actor=None) -> list[ToolConfig]:
    """Create default rows for registered tools that have none; returns the new rows."""
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
