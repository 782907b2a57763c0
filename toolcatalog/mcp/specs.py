"""A server's configuration as plain data: what a connection needs, comparable for equality
(a changed spec means a new connection), never holding an environment *value*."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

#: ``McpServer.agents`` = ``["*"]``: every agent (chosen on purpose; an empty list is no agent).
ALL_AGENTS = "*"


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
            env_names=tuple(get("env_names") or ()),
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
