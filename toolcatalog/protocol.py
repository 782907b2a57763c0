"""The tool protocol (docs/tools.md): what a tool is, what it gets, what it returns.

Every tool — the builtins here, ``read_skill``/``read_skill_file`` in
``skills_registry``, anything added later — is a :class:`Tool` subclass
registered with :func:`register_tool`. The runtime never calls
``Tool.execute`` directly: it calls :func:`run_tool`, which validates the
arguments against the tool's JSON schema, honours cancellation, and turns
every failure into an ``is_error`` :class:`ToolResult` that names the problem.
``run_tool`` never raises into the runtime.

Results use Pi's ``toolResult`` content shapes, so
``ToolResult.to_pi_tool_result(call_id, name)`` drops straight into a
``message`` entry of a session tree.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypedDict, runtime_checkable

from sessions_tree.clean import clean_text  # one function: lone surrogates become U+FFFD everywhere
from toolcatalog.manifest import EXECUTION_MODES, TOOL_KINDS, WORKER_ROUTES, ToolManifest, WorkerRoute
from toolcatalog.protected_paths import protected_paths
from toolcatalog.sandbox import effective_sandbox, resolve_sandbox
from toolcatalog.shared_types import CancelSignal, ResolvedPaths, ToolCancelled, ToolError  # named here too (__all__)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# --- results ------------------------------------------------------------------


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class ImageContent(TypedDict):
    type: Literal["image"]
    data: str  # base64
    mimeType: str


ContentBlock = TextContent | ImageContent


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


@dataclass(slots=True)
class ToolResult:
    """What a tool returns: Pi content blocks, optional details, an error flag."""

    content: list[dict[str, Any]]
    details: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, details: dict[str, Any] | None = None) -> ToolResult:
        return cls(content=[{"type": "text", "text": text}], details=details)

    @classmethod
    def error(cls, message: str, *, details: dict[str, Any] | None = None) -> ToolResult:
        return cls(content=[{"type": "text", "text": message}], details=details, is_error=True)

    def text_output(self) -> str:
        """The concatenated text blocks (handy for logs and tests)."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content}
        if self.details is not None:
            out["details"] = self.details
        out["isError"] = self.is_error
        return out

    def to_pi_tool_result(
        self, tool_call_id: str, tool_name: str, *, timestamp: int | None = None
    ) -> dict[str, Any]:
        """A Pi ``toolResult`` message, keys in Pi's order."""
        message: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "content": self.content,
        }
        if self.details is not None:
            message["details"] = self.details
        message["isError"] = self.is_error
        message["timestamp"] = int(time.time() * 1000) if timestamp is None else timestamp
        return message


def _check_content(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        raise TypeError(f"content must be a list of blocks, got {type(content).__name__}")
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise TypeError(f"content[{index}] must be a dict")
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise TypeError(f"content[{index}].text must be a string")
        elif kind == "image":
            if not isinstance(block.get("data"), str) or not isinstance(block.get("mimeType"), str):
                raise TypeError(f"content[{index}] image needs string 'data' and 'mimeType'")
        else:
            raise TypeError(f"content[{index}].type must be 'text' or 'image', not {kind!r}")
    return content


# --- errors -------------------------------------------------------------------


class UnknownTool(KeyError):
    def __str__(self) -> str:  # KeyError quotes its argument; we want a sentence.
        return str(self.args[0]) if self.args else "unknown tool"


# --- context ------------------------------------------------------------------


ProgressCallback = Callable[["ToolResult"], None]


@runtime_checkable
class CallerSkillPolicy(Protocol):
    """The caller's skill policy as a tool context carries it: a parsed
    ``skills_registry.policy.SkillPolicy`` (this layer sits below the skills app and
    cannot name the class; the skill tools check for it)."""

    def name_allowed(self, name: str, *, for_subagent: bool) -> tuple[bool, str]: ...


# Keys that were once strings in ``extras`` and are typed fields now: a caller still
# putting them there would be silently ignored (a subagent seeing the parent's skills).
_TYPED_NOT_EXTRAS = ("skill_policy", "for_subagent")


def _sandbox_default() -> str:
    """The effective sandbox of this process (``NETA_SANDBOX``, with ``auto`` resolved)."""
    return effective_sandbox().mode


def _protected_default() -> tuple[Path, ...]:
    return protected_paths()


@dataclass(slots=True)
class ToolContext:
    """Everything a tool may use besides its arguments.

    ``roots`` are the workspace roots; every path a tool touches must resolve
    (symlinks followed) inside one of them. ``cwd`` is where relative paths
    start (must be inside a root; defaults to the first root). ``cancel`` is a
    ``threading.Event``-like signal; ``on_progress`` receives partial results
    while a tool streams. ``env_passthrough`` names server environment
    variables the agent's policy lets ``bash`` see although they look secret;
    ``network`` allows network access under the bubblewrap sandbox.
    ``sandbox`` is ``"none"`` or ``"bwrap"`` (default: ``settings.NETA_SANDBOX``,
    ``"auto"`` resolved by the start-up probe). ``protected`` are paths no tool
    touches even inside a root (default: the server's secrets and stores, see
    :mod:`toolcatalog.protected_paths`).
    ``output_dir`` is where full outputs that were truncated are kept (default:
    a temp directory). ``skill_policy`` is the caller's parsed skill policy
    (``skills_registry.policy.SkillPolicy``; None: the default policy) and
    ``for_subagent`` says the caller is a subagent (it then sees only the skills
    whitelisted for subagents, never privileged ones); both are read by the skill
    tools. ``extras`` is open for other layers, for what no tool here needs to know.
    """

    roots: tuple[Path, ...]
    cwd: Path | None = None
    cancel: CancelSignal = field(default_factory=threading.Event)
    on_progress: ProgressCallback | None = None
    env_passthrough: tuple[str, ...] = ()
    network: bool = False
    sandbox: str = field(default_factory=_sandbox_default)
    output_dir: Path | None = None
    protected: tuple[Path, ...] = field(default_factory=_protected_default)
    skill_policy: CallerSkillPolicy | None = None
    for_subagent: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.for_subagent, bool):
            raise TypeError(f"for_subagent must be True or False, not {self.for_subagent!r}")
        if self.skill_policy is not None and not isinstance(self.skill_policy, CallerSkillPolicy):
            raise TypeError(
                f"skill_policy must be a parsed skill policy (SkillPolicy.from_dict), not {type(self.skill_policy).__name__}"
            )
        misplaced = sorted(set(self.extras) & set(_TYPED_NOT_EXTRAS))
        if misplaced:
            raise TypeError(f"{', '.join(misplaced)}: a typed field of ToolContext, not a key of extras")
        if isinstance(self.roots, (str, os.PathLike)):
            self.roots = (self.roots,)  # type: ignore[assignment]
        roots = tuple(Path(os.path.realpath(os.fspath(r))) for r in self.roots)
        if not roots:
            raise ValueError("ToolContext needs at least one workspace root")
        for root in roots:
            if not root.is_dir():
                raise ValueError(f"workspace root {root} is not a directory")
        self.roots = roots
        if self.cwd is None:
            self.cwd = roots[0]
        else:
            cwd = Path(os.path.realpath(os.fspath(self.cwd)))
            if not cwd.is_dir():
                raise ValueError(f"cwd {cwd} is not a directory")
            if not any(cwd == r or r in cwd.parents for r in roots):
                raise ValueError(f"cwd {cwd} is outside the workspace roots")
            self.cwd = cwd
        self.env_passthrough = tuple(self.env_passthrough)
        if not isinstance(self.protected, ResolvedPaths):  # the default was resolved just now
            self.protected = ResolvedPaths(Path(os.path.realpath(os.fspath(p))) for p in self.protected)
        if self.sandbox == "auto":
            self.sandbox = resolve_sandbox("auto").mode
        if self.sandbox not in ("none", "bwrap"):
            raise ValueError(f"sandbox must be 'auto', 'none' or 'bwrap', not {self.sandbox!r}")

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancel.is_set():
            raise ToolCancelled("cancelled")

    def progress(self, partial: ToolResult) -> None:
        """Report a partial result; a failing callback never breaks the tool."""
        if self.on_progress is None:
            return
        try:
            self.on_progress(partial)
        except Exception:  # noqa: BLE001 - a UI hiccup must not fail the tool
            pass


# --- tools --------------------------------------------------------------------


class Tool:
    """Base class of every tool. Subclasses set the class attributes and ``execute``."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    manifest: ClassVar[ToolManifest] = ToolManifest()
    #: Which agents (by name) may have the tool at all; None: every agent. A staff ceiling
    #: like governance (an MCP server open to some agents sets it on its tools); the
    #: projection blocks the others with ``audience_reason``.
    audience: ClassVar[tuple[str, ...] | None] = None
    audience_reason: ClassVar[str] = "not open to this agent"
    #: Whether a call may change something outside the conversation (files, processes, other
    #: systems, data sent out): such calls wait for a person in the ``ask_changes`` approval
    #: mode and are refused in ``plan_only``. True unless a tool says otherwise: a tool nobody
    #: classified is treated as one that changes things.
    changes: ClassVar[bool] = True
    #: The server settings that configure the tool (its console page shows them; a setting
    #: that names a key variable shows whether that variable is set, never its value).
    settings_names: ClassVar[tuple[str, ...]] = ()

    def changes_with(self, args: dict[str, Any]) -> bool:
        """Whether this call (with ``args``) may change something; ``changes`` by default."""
        return self.changes

    def approval_preview(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        """What a person deciding on this call should see beyond its arguments (``edit``: the
        diff against the file as it is now), computed without changing anything; None: nothing
        more. Called with arguments that passed the schema; may raise ToolError."""
        return None

    def prepare_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """Accept legacy argument shapes before validation (Pi's ``prepareArguments``)."""
        return args

    def execute(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raise NotImplementedError

    def unavailable_reason(self) -> str:
        """Why this deployment cannot offer the tool at all ("" when it can): a setting it
        needs is missing (``web_search`` without a search backend). The projection reports
        it as the reason, with source ``configuration``, before any policy is consulted."""
        return ""

    def definition(self) -> dict[str, Any]:
        """What an LLM provider is told about the tool."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


_validators: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def _jsonschema():
    """jsonschema (~0.3 s to import), loaded on the first validation: a process that only
    lists or registers tools without checks (the subagent child's start) never pays it early."""
    import jsonschema  # see the docstring

    return jsonschema


#: Off only in the subagent child (:func:`defer_schema_checks`): its builtins' schemas are
#: then checked on the first call of each tool (``_validator_for`` always checks).
_check_schemas_at_registration = True


def defer_schema_checks() -> None:
    """Check a tool's parameter schema at its first call instead of at ``register_tool``."""
    global _check_schemas_at_registration
    _check_schemas_at_registration = False


def _validator_for(tool: Tool) -> Draft202012Validator:
    Draft202012Validator = _jsonschema().Draft202012Validator
    schema = tool.parameters
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:  # the id of a collected dict may be reused
        Draft202012Validator.check_schema(schema)
        cached = (schema, Draft202012Validator(schema))
        _validators[id(schema)] = cached
    return cached[1]


def validate_args(tool: Tool, args: Any) -> list[str]:
    """Problems with ``args`` for ``tool``, each naming the field; empty when valid."""
    if not isinstance(args, dict):
        return [f"arguments must be a JSON object, got {type(args).__name__}"]
    problems = []
    for error in sorted(_validator_for(tool).iter_errors(args), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems


#: A validation error quotes the value it refuses (``'…' is too long``): each problem is cut
#: to this many characters and at most this many are listed, so a refused megabyte argument
#: does not come back to the model as a megabyte tool result.
MAX_PROBLEM_CHARS = 400
MAX_PROBLEMS = 20


def _shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its start and end (where a validation message says
    what is wrong: ``'…' is too long``), the middle named by its length."""
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit // 4
    return f"{text[:head]}… [{len(text) - head - tail} characters] …{text[-tail:]}"


def run_tool(tool: Tool, ctx: ToolContext, args: Any) -> ToolResult:
    """Validate, run, and normalize: the one way the runtime runs a tool. Never raises."""
    name = getattr(tool, "name", "?")
    if isinstance(args, dict):
        try:
            args = tool.prepare_arguments(dict(args))
        except Exception as exc:  # noqa: BLE001
            return ToolResult.error(_shorten(clean_text(f"Invalid arguments for tool {name!r}: {exc}"), MAX_PROBLEM_CHARS * 2))
    jsonschema = _jsonschema()
    try:
        problems = validate_args(tool, args)
    except jsonschema.SchemaError as exc:
        return ToolResult.error(f"tool {name!r} has an invalid parameter schema: {exc.message}")
    if problems:
        shown = [_shorten(clean_text(p), MAX_PROBLEM_CHARS) for p in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"… and {len(problems) - MAX_PROBLEMS} more")
        return ToolResult.error(f"Invalid arguments for tool {name!r}: " + "; ".join(shown), details={"validationErrors": shown})
    if ctx.cancel.is_set():
        return ToolResult.error(f"Tool {name!r} was cancelled before it started", details={"cancelled": True})
    try:
        result = tool.execute(ctx, args)
        if not isinstance(result, ToolResult):
            raise TypeError(f"execute() returned {type(result).__name__}, not ToolResult")
        _check_content(result.content)
        if result.details is not None and not isinstance(result.details, dict):
            raise TypeError("details must be a dict or None")
    except ToolCancelled as exc:
        details = dict(exc.details or {})
        details["cancelled"] = True
        return ToolResult.error(clean_text(f"Tool {name!r} was cancelled: {exc}"), details=details)
    except ToolError as exc:
        return ToolResult.error(clean_text(str(exc)), details=_clean(exc.details) if exc.details else None)
    except Exception as exc:  # noqa: BLE001 - the runtime must never see a raise
        return ToolResult.error(clean_text(f"Tool {name!r} failed: {type(exc).__name__}: {exc}"))
    return ToolResult(content=_clean(result.content), details=_clean(result.details), is_error=bool(result.is_error))


def preview_for_approval(tool: Tool, ctx: ToolContext, args: Any) -> dict[str, Any] | None:
    """``tool.approval_preview`` for a call waiting for a person: None when the tool has none
    or the arguments do not pass its schema (the request shows them as they are);
    ``{"previewError": …}`` when the call could not run as asked (the file changed, the text is
    not there). Never raises, never changes anything."""
    if type(tool).approval_preview is Tool.approval_preview or not isinstance(args, dict):
        return None
    try:
        args = tool.prepare_arguments(dict(args))
        if validate_args(tool, args):
            return None
        preview = tool.approval_preview(ctx, args)
    except ToolError as exc:
        return {"previewError": _shorten(clean_text(str(exc)), MAX_PROBLEM_CHARS)}
    except Exception:  # noqa: BLE001 - a preview is an aid: the request goes out without it
        logger.exception("tool %r: approval preview failed", getattr(tool, "name", "?"))
        return None
    return _clean(preview) if isinstance(preview, dict) else None


# --- registry -----------------------------------------------------------------
# The registry knows no tool. The builtins register themselves when
# ``toolcatalog.builtins`` is imported, which the app's ``ready()`` does (skill
# tools likewise in ``skills_registry``); a process without Django imports
# ``toolcatalog.builtins`` itself. This module never imports the builtins: they
# import it (an import-linter contract keeps it so).

_registry: dict[str, Tool] = {}
_registry_lock = threading.Lock()
_TOOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def register_tool(tool: Tool, *, replace: bool = False) -> Tool:
    """Add ``tool`` to the process-wide registry. A second tool with the same name is an error."""
    if not isinstance(tool, Tool):
        raise TypeError(f"register_tool needs a Tool instance, got {tool!r}")
    name = tool.name
    if not name or not set(name) <= _TOOL_NAME_CHARS or len(name) > 64:
        raise ValueError(f"tool name {name!r} must be 1-64 chars of a-z, 0-9, '_' or '-'")
    if not isinstance(tool.manifest, ToolManifest):
        raise TypeError(f"tool {name!r}: manifest must be a ToolManifest")
    if _check_schemas_at_registration:
        _jsonschema().Draft202012Validator.check_schema(tool.parameters)
    with _registry_lock:
        existing = _registry.get(name)
        if existing is not None and existing is not tool and not replace:
            raise ValueError(f"a tool named {name!r} is already registered ({existing!r})")
        _registry[name] = tool
    return tool


_refreshers: list[Callable[[], None]] = []


def add_registry_refresher(refresh: Callable[[], None]) -> None:
    """Register a function that brings tools defined outside the code up to date (the MCP
    servers' tools, ``toolcatalog.mcp.catalog``); :func:`refresh_registry` runs them. The
    app's ``ready()`` adds it, so a process without Django (the subagent child) has none."""
    if refresh not in _refreshers:
        _refreshers.append(refresh)


def refresh_registry() -> None:
    """Run the refreshers: the projection, policy validation and the console pages call it
    before they read the registry."""
    for refresh in list(_refreshers):
        refresh()


def unregister_tool(name: str) -> None:
    with _registry_lock:
        _registry.pop(name, None)


def get_tool(name: str) -> Tool:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownTool(f"unknown tool {name!r}") from None


def all_tools() -> list[Tool]:
    """Registered tools in registration order (builtins first)."""
    with _registry_lock:
        return list(_registry.values())


def tool_names() -> list[str]:
    return [t.name for t in all_tools()]


__all__ = [
    "CallerSkillPolicy",
    "CancelSignal",
    "ContentBlock",
    "ResolvedPaths",
    "EXECUTION_MODES",
    "ImageContent",
    "TOOL_KINDS",
    "TextContent",
    "Tool",
    "ToolCancelled",
    "ToolContext",
    "ToolError",
    "ToolManifest",
    "ToolResult",
    "UnknownTool",
    "WORKER_ROUTES",
    "WorkerRoute",
    "add_registry_refresher",
    "all_tools",
    "clean_text",
    "get_tool",
    "refresh_registry",
    "register_tool",
    "run_tool",
    "tool_names",
    "unregister_tool",
    "validate_args",
]
