"""The tool catalog's shared types, below the protocol: what the sandbox and the protected
paths need from the tool world (an error the model reads, a cancel signal, paths resolved
already) without importing the protocol, which imports them."""

from __future__ import annotations

from typing import Any, Protocol


class ToolError(Exception):
    """A tool refuses or fails in a way the model should read (becomes ``is_error``)."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details


class ToolCancelled(ToolError):
    """The run was cancelled while the tool was working."""


class CancelSignal(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class ResolvedPaths(tuple):
    """Paths resolved already (``os.path.realpath``): a context takes them as they are."""

    __slots__ = ()
