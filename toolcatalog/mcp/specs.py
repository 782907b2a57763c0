"""A server's configuration as plain data: what a connection needs, comparable for equality
(a changed spec means a new connection), never holding an environment *value*."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from toolcatalog.environment import key_names, tool_variable_reason

#: ``McpServer.agents`` = ``["*"]``: every agent (chosen on purpose; an empty list is no agent).
ALL_AGENTS = "*"


def usable_env_names(names) -> tuple[str, ...]:
    """The names a server may be handed: a stored row's names that the rule refuses (a server
    setting, a provider key in use: ``toolcatalog.environment``) are dropped here, where the
    models can be read, and again when the process starts."""
    keys = key_names()
    return tuple(name for name in names if isinstance(name, str) and tool_variable_reason(name, keys=keys) is None)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str
    transport: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    env_names: tuple[str, ...] = ()
    connect_timeout: float = 10.0
    call_timeout: float = 60.0
    network: bool = False
    read_only_paths: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: Any) -> ServerSpec:
        get = row.get if isinstance(row, dict) else lambda key: getattr(row, key)
        return cls(
            name=get("name"),
            transport=get("transport"),
            command=get("command") or "",
            args=tuple(get("args") or ()),
            url=get("url") or "",
            env_names=usable_env_names(get("env_names") or ()),
            connect_timeout=float(get("connect_timeout")),
            call_timeout=float(get("call_timeout")),
            network=bool(get("network")),
            read_only_paths=tuple(get("read_only_paths") or ()),
        )

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return self.url

    def resolved_command(self) -> str:
        """The program as an absolute path (bubblewrap needs one; a name is looked up on PATH)."""
        if os.path.isabs(self.command):
            return self.command
        found = shutil.which(self.command)
        if found is None:
            raise FileNotFoundError(f"command {self.command!r} not found on PATH")
        return found
