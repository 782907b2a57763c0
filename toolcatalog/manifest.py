"""Tool manifests: the static facts about a tool that policy decides against (docs/tools.md, "Manifest").

A manifest says what a tool *is* (``kind``), how it runs (``execution_mode``),
what it needs (a shell, write access, a skill scope) and where it runs when an
agent's work happens inside a worker process (``default_route``). Governance
rows and agent policies may change the route; they never change the other facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

WorkerRoute = Literal["worker-local", "main-process-proxy", "disabled"]
#: ``worker-local``: the tool runs inside the worker process (subagent) itself.
#: ``main-process-proxy``: the worker asks the main process to run it.
#: ``disabled``: the tool is not offered inside workers at all.
WORKER_ROUTES: tuple[str, ...] = ("worker-local", "main-process-proxy", "disabled")

#: ``builtin``: the core tools (read, write, edit, bash, ls, find, grep), inherited
#: by default. ``skill``: tools that serve skills (read_skill…), offered when the
#: run has a skill scope. ``extension``: anything else, off unless enabled. ``mcp``: a
#: tool of an MCP server staff configured (``McpServer``), on for the agents the server
#: is open to (docs/tools.md, "MCP tools").
TOOL_KINDS: tuple[str, ...] = ("builtin", "skill", "extension", "mcp")

#: ``in-process``: Python code in whichever process runs the tool.
#: ``subprocess``: starts OS processes (bash); confined by process group,
#: limits and, with ``NETA_SANDBOX=bwrap``, bubblewrap.
EXECUTION_MODES: tuple[str, ...] = ("in-process", "subprocess")


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """Static facts about a tool. Invalid combinations fail at definition time."""

    kind: str = "builtin"
    execution_mode: str = "in-process"
    supported_in_worker: bool = True
    requires_shell: bool = False
    requires_write: bool = False
    requires_skill_scope: bool = False
    # Reaches the network (web_fetch, web_search): a subagent gets it only when its agent's
    # tool policy allows network (``network: true``).
    requires_network: bool = False
    default_route: str = "worker-local"

    def __post_init__(self) -> None:
        if self.kind not in TOOL_KINDS:
            raise ValueError(f"manifest.kind must be one of {TOOL_KINDS}, not {self.kind!r}")
        if self.execution_mode not in EXECUTION_MODES:
            raise ValueError(
                f"manifest.execution_mode must be one of {EXECUTION_MODES}, not {self.execution_mode!r}"
            )
        if self.default_route not in WORKER_ROUTES:
            raise ValueError(f"manifest.default_route must be one of {WORKER_ROUTES}, not {self.default_route!r}")
        for flag in ("supported_in_worker", "requires_shell", "requires_write", "requires_skill_scope", "requires_network"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"manifest.{flag} must be a bool")
        if not self.supported_in_worker and self.default_route == "worker-local":
            raise ValueError("manifest: a tool not supported in a worker cannot default to 'worker-local'")

    @property
    def is_core(self) -> bool:
        return self.kind == "builtin"

    def route_allowed(self, route: str) -> bool:
        """Whether ``route`` is possible for this tool at all."""
        return route in WORKER_ROUTES and (route != "worker-local" or self.supported_in_worker)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "execution_mode": self.execution_mode,
            "supported_in_worker": self.supported_in_worker,
            "requires_shell": self.requires_shell,
            "requires_write": self.requires_write,
            "requires_skill_scope": self.requires_skill_scope,
            "requires_network": self.requires_network,
            "default_route": self.default_route,
        }
