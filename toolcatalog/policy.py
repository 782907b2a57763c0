"""An agent's tool policy: a plain, validated dict (stored as JSON on the runtime's Agent).

Shape (every key optional)::

    {
      "inherit_core_tools": true,              # core (builtin) tools on by default
      "enabled": ["read_skill"],               # turn tools on
      "disabled": ["bash"],                    # turn tools off
      "per_tool": {
        "grep": {"enabled": true, "prompt_hint": "Prefer grep over bash+grep.",
                 "allow_in_subagent": false, "worker_routing": "main-process-proxy"}
      },
      "env_passthrough": ["GITHUB_TOKEN"],     # secret-looking variables bash may see
      "network": false,                        # network inside the bwrap sandbox
      "approval": "auto"                       # which calls wait for a person (APPROVAL_MODES)
    }

:meth:`ToolPolicy.from_dict` rejects unknown fields, unknown tool names,
contradictions and bad values with a :class:`PolicyError` whose messages name
the field (``per_tool.bash.worker_routing: …``). ``to_dict`` gives the
canonical form back; ``from_dict(to_dict(p)) == p``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolcatalog.environment import is_valid_env_name, server_setting_reason
from toolcatalog.manifest import WORKER_ROUTES
from toolcatalog.protocol import all_tools

MAX_PROMPT_HINT = 4000
MAX_PASSTHROUGH = 64

_POLICY_KEYS = ("inherit_core_tools", "enabled", "disabled", "per_tool", "env_passthrough", "network", "approval")
#: Which tool calls wait for a person's approval, least strict first (docs/tools.md, "Approvals"):
#: none; the calls that change something (``Tool.changes_with``); every call but the
#: bookkeeping ones; no changing call at all (they are refused, and not offered to the model).
APPROVAL_MODES = ("auto", "ask_changes", "ask_all", "plan_only")
_PER_TOOL_KEYS = ("enabled", "prompt_hint", "allow_in_subagent", "worker_routing")


class PolicyError(ValueError):
    """A policy that cannot be used; ``errors`` is a list of (field, message)."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{where}: {message}" for where, message in errors))

    def as_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for where, message in self.errors:
            out.setdefault(where, []).append(message)
        return out


@dataclass(frozen=True, slots=True)
class PerToolPolicy:
    enabled: bool | None = None
    prompt_hint: str | None = None
    allow_in_subagent: bool | None = None
    worker_routing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _PER_TOOL_KEYS if getattr(self, k) is not None}


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    inherit_core_tools: bool = True
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    per_tool: Mapping[str, PerToolPolicy] = field(default_factory=dict)
    env_passthrough: tuple[str, ...] = ()
    network: bool = False
    approval: str = "auto"

    def for_tool(self, name: str) -> PerToolPolicy:
        return self.per_tool.get(name) or PerToolPolicy()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "inherit_core_tools": self.inherit_core_tools,
            "enabled": list(self.enabled),
            "disabled": list(self.disabled),
            "per_tool": {name: rule.to_dict() for name, rule in sorted(self.per_tool.items())},
        }
        out["env_passthrough"] = list(self.env_passthrough)
        out["network"] = self.network
        out["approval"] = self.approval
        return out

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any] | None,
        *,
        known_tools: Iterable[str] | None = None,
        unknown_tools: str = "error",
    ) -> ToolPolicy:
        """Validate ``data``. ``unknown_tools="ignore"`` drops unknown names instead of failing
        (for policies stored before a tool was removed); see :attr:`ignored_names`."""
        policy, _ignored = parse_policy(data, known_tools=known_tools, unknown_tools=unknown_tools)
        return policy


def _known(known_tools: Iterable[str] | None) -> dict[str, Any]:
    tools = {t.name: t for t in all_tools()}
    if known_tools is None:
        return tools
    return {name: tools.get(name) for name in known_tools}


def _names_missing(data: Mapping[str, Any], tools: Mapping[str, Any]) -> bool:
    names: list[Any] = []
    for key in ("enabled", "disabled"):
        value = data.get(key)
        if isinstance(value, (list, tuple)):
            names += list(value)
    if isinstance(data.get("per_tool"), Mapping):
        names += list(data["per_tool"])
    return any(isinstance(name, str) and name not in tools for name in names)


def parse_policy(
    data: Mapping[str, Any] | None,
    *,
    known_tools: Iterable[str] | None = None,
    unknown_tools: str = "error",
) -> tuple[ToolPolicy, list[str]]:
    """``(policy, ignored unknown tool names)``; raises :class:`PolicyError` on bad input."""
    if unknown_tools not in ("error", "ignore"):
        raise ValueError("unknown_tools must be 'error' or 'ignore'")
    if data is None:
        return ToolPolicy(), []
    errors: list[tuple[str, str]] = []
    ignored: list[str] = []
    if not isinstance(data, Mapping):
        raise PolicyError([("policy", f"must be an object, got {type(data).__name__}")])
    tools = _known(known_tools)
    if known_tools is None and _names_missing(data, tools):
        # A name this process has not registered yet (an MCP server's tool listed in
        # another process): bring the registry up to date once, then decide.
        from toolcatalog.protocol import refresh_registry

        refresh_registry()
        tools = _known(known_tools)

    for key in data:
        if key not in _POLICY_KEYS:
            errors.append((str(key), f"unknown field (allowed: {', '.join(_POLICY_KEYS)})"))

    def boolean(key: str, default: bool) -> bool:
        value = data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            errors.append((key, f"must be true or false, not {value!r}"))
            return default
        return value

    def known_name(where: str, name: Any) -> bool:
        if not isinstance(name, str):
            errors.append((where, f"must be a tool name (string), not {name!r}"))
            return False
        if name not in tools:
            if unknown_tools == "ignore":
                ignored.append(name)
            else:
                errors.append((where, f"unknown tool {name!r}"))
            return False
        return True

    def name_list(key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            errors.append((key, f"must be a list of tool names, not {type(value).__name__}"))
            return ()
        out: list[str] = []
        for index, name in enumerate(value):
            if known_name(f"{key}[{index}]", name) and name not in out:
                out.append(name)
        return tuple(out)

    inherit = boolean("inherit_core_tools", True)
    network = boolean("network", False)
    approval = data.get("approval", "auto")
    if approval not in APPROVAL_MODES:
        errors.append(("approval", f"must be one of {', '.join(APPROVAL_MODES)}, not {approval!r}"))
        approval = "auto"
    enabled = name_list("enabled")
    disabled = name_list("disabled")
    for index, name in enumerate(disabled):
        if name in enabled:
            errors.append((f"disabled[{index}]", f"{name!r} is also listed in enabled"))

    per_tool: dict[str, PerToolPolicy] = {}
    raw_per_tool = data.get("per_tool", {})
    if raw_per_tool is None:
        raw_per_tool = {}
    if not isinstance(raw_per_tool, Mapping):
        errors.append(("per_tool", f"must be an object keyed by tool name, not {type(raw_per_tool).__name__}"))
        raw_per_tool = {}
    for name, rule in raw_per_tool.items():
        where = f"per_tool.{name}"
        if not known_name(where, name):
            continue
        if not isinstance(rule, Mapping):
            errors.append((where, f"must be an object, not {type(rule).__name__}"))
            continue
        for key in rule:
            if key not in _PER_TOOL_KEYS:
                errors.append((f"{where}.{key}", f"unknown field (allowed: {', '.join(_PER_TOOL_KEYS)})"))
        values: dict[str, Any] = {}
        for key in ("enabled", "allow_in_subagent"):
            value = rule.get(key)
            if value is not None and not isinstance(value, bool):
                errors.append((f"{where}.{key}", f"must be true, false or null, not {value!r}"))
            else:
                values[key] = value
        hint = rule.get("prompt_hint")
        if hint is not None:
            if not isinstance(hint, str):
                errors.append((f"{where}.prompt_hint", f"must be a string, not {type(hint).__name__}"))
                hint = None
            elif len(hint) > MAX_PROMPT_HINT:
                errors.append((f"{where}.prompt_hint", f"is {len(hint)} characters long (limit {MAX_PROMPT_HINT})"))
                hint = None
            else:
                try:
                    hint.encode("utf-8")
                except UnicodeEncodeError:
                    errors.append((f"{where}.prompt_hint", "is not valid Unicode (lone surrogate)"))
                    hint = None
        values["prompt_hint"] = hint
        route = rule.get("worker_routing")
        if route is not None:
            if route not in WORKER_ROUTES:
                errors.append((f"{where}.worker_routing", f"must be one of {', '.join(WORKER_ROUTES)}, not {route!r}"))
                route = None
            else:
                tool = tools.get(name)
                if tool is not None and not tool.manifest.route_allowed(route):
                    errors.append((f"{where}.worker_routing", f"{name!r} cannot run inside a worker process"))
                    route = None
        values["worker_routing"] = route
        if values.get("enabled") is False and name in enabled:
            errors.append((f"{where}.enabled", f"false contradicts enabled (which lists {name!r})"))
        if values.get("enabled") is True and name in disabled:
            errors.append((f"{where}.enabled", f"true contradicts disabled (which lists {name!r})"))
        per_tool[name] = PerToolPolicy(**values)

    passthrough: list[str] = []
    raw_pass = data.get("env_passthrough", [])
    if raw_pass is None:
        raw_pass = []
    if not isinstance(raw_pass, (list, tuple)):
        errors.append(("env_passthrough", f"must be a list of variable names, not {type(raw_pass).__name__}"))
        raw_pass = []
    if len(raw_pass) > MAX_PASSTHROUGH:
        errors.append(("env_passthrough", f"lists {len(raw_pass)} variables (limit {MAX_PASSTHROUGH})"))
    for index, name in enumerate(raw_pass):
        if not isinstance(name, str) or not is_valid_env_name(name):
            errors.append((f"env_passthrough[{index}]", f"not an environment variable name: {name!r}"))
        elif server_setting_reason(name):
            errors.append((f"env_passthrough[{index}]", server_setting_reason(name)))
        elif name not in passthrough:
            passthrough.append(name)

    if errors:
        raise PolicyError(errors)
    policy = ToolPolicy(
        inherit_core_tools=inherit,
        enabled=enabled,
        disabled=disabled,
        per_tool=per_tool,
        env_passthrough=tuple(passthrough),
        network=network,
        approval=approval,
    )
    return policy, ignored


def validate_policy(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """The canonical dict for ``data`` (for model fields and API input); raises :class:`PolicyError`."""
    return ToolPolicy.from_dict(data).to_dict()
