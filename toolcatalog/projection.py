"""The effective tool projection: one decision per known tool, with the reason.

``resolve_tools(policy, for_subagent=…, runtime_policy=…)`` combines four layers
and is the only place that does. The runtime, the API and every page consume
its result; nothing re-derives it.

Layers, and the order in which a *block* is decided (the first one wins and is
reported as ``source``/``reason``):

1. **governance** (``ToolConfig`` rows, staff): ``enabled=False`` blocks the
   tool for every agent.
   A tool with an ``audience`` (an MCP server's tools, open to some agents) is
   blocked the same way for every other agent, with the tool's ``audience_reason``.
2. **model**, **configuration**, then **runtime policy**: a model without tool support
   (``no_tools_reason``: every tool off, ``source`` ``model``); a setting the tool needs
   is missing in this deployment (``Tool.unavailable_reason``: ``web_search`` without a
   search backend, ``source`` ``configuration``); this run's capabilities: no shell,
   read-only, no skill scope, or an explicit denial.
3. **agent policy**: ``per_tool.enabled=false`` or ``disabled`` turn a tool off;
   ``enabled`` or ``per_tool.enabled=true`` turn it on; otherwise the
   **manifest** default applies — core (builtin) tools follow
   ``inherit_core_tools``, skill tools are on, extension tools are off.
4. for a **subagent** only: governance or agent ``allow_in_subagent=false``,
   a worker route of ``disabled`` (governance's ``disabled`` cannot be
   overridden by the agent), or a ``worker-local`` route for a tool the
   manifest says cannot run in a worker, or a network tool (``requires_network``) when the
   agent's policy does not allow network, or an MCP tool the agent's policy does not
   enable by name (MCP tools reach subagents only through their policies).

Staff governance is a ceiling: an agent can only narrow what it allows. The
route is the agent's ``per_tool.worker_routing``, else governance's, else the
manifest default; it says where the tool runs when a subagent (a worker
process) calls it. Label, description and renderer come from governance
overrides; the prompt hint from the agent's policy, else governance.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolcatalog import catalog_version
from toolcatalog.models import ToolConfig
from toolcatalog.policy import PolicyError, ToolPolicy, parse_policy
from toolcatalog.protocol import Tool, UnknownTool, all_tools, get_tool, refresh_registry

SOURCES = ("manifest", "governance", "configuration", "model", "agent_policy", "runtime_policy")


@dataclass(frozen=True, slots=True)
class GovernanceRule:
    """A ``ToolConfig`` row as plain data (so workers can resolve without a database)."""

    enabled: bool = True
    label: str = ""
    description: str = ""
    prompt_hint: str = ""
    allow_in_subagent: bool = True
    worker_routing: str = ""
    renderer_key: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "label": self.label,
            "description": self.description,
            "prompt_hint": self.prompt_hint,
            "allow_in_subagent": self.allow_in_subagent,
            "worker_routing": self.worker_routing,
            "renderer_key": self.renderer_key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GovernanceRule:
        return cls(**{k: data[k] for k in cls.__slots__ if k in data})

    @classmethod
    def from_config(cls, row: ToolConfig) -> GovernanceRule:
        return cls(
            enabled=row.enabled,
            label=row.label_override,
            description=row.description_override,
            prompt_hint=row.prompt_hint,
            allow_in_subagent=row.allow_in_subagent,
            worker_routing=row.worker_routing,
            renderer_key=row.renderer_key,
        )


def governance_rules() -> dict[str, GovernanceRule]:
    """Every ``ToolConfig`` row as a plain rule, by tool name (one query; none when the
    catalog's version is known and this process read the rows at it: ``catalog_version``).
    The catalog read also brings the registry up to date (``refresh_registry``: the MCP
    servers' tools, one more query under the same rule), so a caller that reads the rules
    once for many projections (a list page) refreshes once."""
    refresh_registry()
    rules = catalog_version.cached("governance_rules", lambda: {row.name: GovernanceRule.from_config(row) for row in ToolConfig.objects.all()})
    return dict(rules)


@dataclass(frozen=True, slots=True)
class RuntimePolicy:
    """What this run can offer at all, whatever the agent wants."""

    allow_shell: bool = True
    allow_write: bool = True
    skill_scope: bool = True
    denied: Mapping[str, str] = field(default_factory=dict)  # tool name → reason
    # The model this run calls cannot take tool definitions: no tool is offered, and the
    # reason (which model) is given for each (the turn sends none, the prompt lists none).
    no_tools_reason: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RuntimePolicy:
        if data is None:
            return cls()
        errors = []
        for key in data:
            if key not in ("allow_shell", "allow_write", "skill_scope", "denied", "no_tools_reason"):
                errors.append((f"runtime_policy.{key}", "unknown field"))
        for key in ("allow_shell", "allow_write", "skill_scope"):
            if key in data and not isinstance(data[key], bool):
                errors.append((f"runtime_policy.{key}", f"must be true or false, not {data[key]!r}"))
        denied = data.get("denied", {}) or {}
        if not isinstance(denied, Mapping) or not all(isinstance(v, str) for v in denied.values()):
            errors.append(("runtime_policy.denied", "must map tool names to reasons"))
        if not isinstance(data.get("no_tools_reason", ""), str):
            errors.append(("runtime_policy.no_tools_reason", "must be a string"))
        if errors:
            raise PolicyError(errors)
        return cls(
            allow_shell=data.get("allow_shell", True),
            allow_write=data.get("allow_write", True),
            skill_scope=data.get("skill_scope", True),
            denied=dict(denied),
            no_tools_reason=data.get("no_tools_reason", ""),
        )


@dataclass(frozen=True, slots=True)
class ToolDecision:
    name: str
    label: str
    description: str
    kind: str
    effective: bool
    route: str
    route_source: str
    source: str
    reason: str
    prompt_hint: str
    renderer: str
    manifest: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "kind": self.kind,
            "effective": self.effective,
            "route": self.route,
            "routeSource": self.route_source,
            "source": self.source,
            "reason": self.reason,
            "promptHint": self.prompt_hint,
            "renderer": self.renderer,
            "manifest": dict(self.manifest),
        }


@dataclass(frozen=True, slots=True)
class ToolProjection:
    decisions: tuple[ToolDecision, ...]
    for_subagent: bool = False
    warnings: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[ToolDecision]:
        return iter(self.decisions)

    def __len__(self) -> int:
        return len(self.decisions)

    def get(self, name: str) -> ToolDecision | None:
        return next((d for d in self.decisions if d.name == name), None)

    def __getitem__(self, name: str) -> ToolDecision:
        decision = self.get(name)
        if decision is None:
            raise UnknownTool(f"unknown tool {name!r}")
        return decision

    @property
    def effective(self) -> list[ToolDecision]:
        return [d for d in self.decisions if d.effective]

    def effective_names(self) -> list[str]:
        return [d.name for d in self.decisions if d.effective]

    def tool(self, name: str) -> Tool:
        """The tool instance for an effective decision; an unknown or blocked name raises ``UnknownTool``."""
        decision = self.get(name)
        if decision is None or not decision.effective:
            why = decision.reason if decision else "it does not exist"
            raise UnknownTool(f"tool {name!r} is not available: {why}")
        return get_tool(name)

    def tool_definitions(self) -> list[dict[str, Any]]:
        """What the LLM is told: effective tools with governance's label/description."""
        return [
            {"name": d.name, "description": d.description, "parameters": get_tool(d.name).parameters}
            for d in self.effective
        ]

    def prompt_hints(self) -> dict[str, str]:
        return {d.name: d.prompt_hint for d in self.effective if d.prompt_hint}

    def to_dict(self) -> dict[str, Any]:
        return {
            "forSubagent": self.for_subagent,
            "tools": [d.to_dict() for d in self.decisions],
            "warnings": list(self.warnings),
        }


def _decide(
    tool: Tool,
    policy: ToolPolicy,
    rule: GovernanceRule | None,
    runtime: RuntimePolicy,
    for_subagent: bool,
    agent: str | None = None,
) -> ToolDecision:
    manifest = tool.manifest
    name = tool.name
    per = policy.for_tool(name)
    gov = rule or GovernanceRule()

    if per.worker_routing:
        route, route_source = per.worker_routing, "agent_policy"
    elif gov.worker_routing:
        route, route_source = gov.worker_routing, "governance"
    else:
        route, route_source = manifest.default_route, "manifest"

    def decision(effective: bool, source: str, reason: str = "") -> ToolDecision:
        return ToolDecision(
            name=name,
            label=gov.label or tool.label or name,
            description=gov.description or tool.description,
            kind=manifest.kind,
            effective=effective,
            route=route,
            route_source=route_source,
            source=source,
            reason=reason,
            prompt_hint=per.prompt_hint if per.prompt_hint is not None else gov.prompt_hint,
            renderer=gov.renderer_key or name,
            manifest=manifest.to_dict(),
        )

    # 1. governance ceiling
    if not gov.enabled:
        return decision(False, "governance", "disabled by staff governance (ToolConfig)")
    if tool.audience is not None and agent not in tool.audience:
        return decision(False, "governance", tool.audience_reason)
    # 2. what this deployment and this run can offer
    if runtime.no_tools_reason:
        return decision(False, "model", runtime.no_tools_reason)
    unavailable = tool.unavailable_reason()
    if unavailable:
        return decision(False, "configuration", unavailable)
    if name in runtime.denied:
        return decision(False, "runtime_policy", runtime.denied[name] or "denied by the runtime policy")
    if manifest.requires_shell and not runtime.allow_shell:
        return decision(False, "runtime_policy", "needs a shell, and this run does not allow shell commands")
    if manifest.requires_write and not runtime.allow_write:
        return decision(False, "runtime_policy", "writes files, and this run is read-only")
    if manifest.requires_skill_scope and not runtime.skill_scope:
        return decision(False, "runtime_policy", "needs a skill scope, and this run has no skills")
    # 3. the agent's policy over the manifest default
    if per.enabled is False:
        return decision(False, "agent_policy", "disabled by the agent's per_tool setting")
    if name in policy.disabled:
        return decision(False, "agent_policy", "listed in the agent's disabled tools")
    if per.enabled is True or name in policy.enabled:
        on_source = "agent_policy"
    elif manifest.kind == "builtin":
        if not policy.inherit_core_tools:
            return decision(False, "agent_policy", "core tools are not inherited (inherit_core_tools is false)")
        on_source = "manifest"
    elif manifest.kind in ("skill", "mcp"):
        on_source = "manifest"
    else:
        return decision(False, "manifest", "extension tools are off unless the agent enables them")
    # 4. subagents run in worker processes
    if for_subagent:
        if not gov.allow_in_subagent:
            return decision(False, "governance", "not allowed in subagents by staff governance")
        if per.allow_in_subagent is False:
            return decision(False, "agent_policy", "not allowed in subagents by the agent's policy")
        if gov.worker_routing == "disabled":
            return decision(False, "governance", "worker routing is 'disabled' by staff governance")
        if route == "disabled":
            return decision(False, route_source, "worker routing is 'disabled'")
        if route == "worker-local" and not manifest.supported_in_worker:
            return decision(False, "manifest", "cannot run inside a worker process, and its route is 'worker-local'")
        if manifest.requires_network and not policy.network:
            return decision(False, "agent_policy", "reaches the network, and the agent's tool policy does not allow network (network: false)")
        if manifest.kind == "mcp" and on_source != "agent_policy":
            return decision(False, "agent_policy", "an MCP tool reaches a subagent only when the agent's policy enables it by name")
    return decision(True, on_source)


def resolve_tools(
    policy: ToolPolicy | Mapping[str, Any] | None,
    *,
    for_subagent: bool = False,
    runtime_policy: RuntimePolicy | Mapping[str, Any] | None = None,
    governance: Mapping[str, GovernanceRule] | None = None,
    agent: str | None = None,
) -> ToolProjection:
    """The effective tool projection for ``policy``.

    ``policy`` may be a :class:`ToolPolicy` or its dict (validated; names of
    tools that no longer exist are ignored and reported in ``warnings``).
    ``governance`` defaults to the ``ToolConfig`` rows in the database (read with
    :func:`governance_rules`, which also brings the MCP servers' tools up to date in this
    process's registry). ``agent``: the agent's name, for tools open only to some agents
    (None: only tools open to all).
    """
    warnings: list[str] = []
    if not isinstance(policy, ToolPolicy):
        policy, ignored = parse_policy(policy, unknown_tools="ignore")
        warnings += [f"agent policy names unknown tool {name!r} (ignored)" for name in ignored]
    runtime = runtime_policy if isinstance(runtime_policy, RuntimePolicy) else RuntimePolicy.from_dict(runtime_policy)
    if governance is None:
        governance = governance_rules()
    tools = all_tools()
    known = {t.name for t in tools}
    for name in sorted(set(governance) - known):
        warnings.append(f"governance row for unknown tool {name!r} (ignored)")
    for name in sorted(set(runtime.denied) - known):
        warnings.append(f"runtime policy denies unknown tool {name!r} (ignored)")
    decisions = tuple(_decide(t, policy, governance.get(t.name), runtime, for_subagent, agent) for t in tools)
    return ToolProjection(decisions=decisions, for_subagent=for_subagent, warnings=tuple(warnings))
