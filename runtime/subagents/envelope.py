"""The task envelope: everything a subagent child process gets, as its first stdin line (docs/subagents.md).

The host builds a :class:`TaskEnvelope` (from the parent run, the child agent and the
subagent policy), writes ``envelope.to_json()`` as one line, and the child parses it
with :func:`parse_envelope`. Parsing is strict: a missing or unknown key, a wrong type
or an impossible value is an :class:`EnvelopeError` naming the path
(``envelope.limits.maxTurns: must be an integer >= 1, got 0``), so a host bug is caught
at the child's door instead of half-running a task.

Keys are camelCase on the wire, like the rest of the protocol; attributes are
snake_case. ``v`` is the envelope version; a child refuses a version it does not know.

This module is plain Python: no Django, no database. ``tool_settings_from_django`` is
the one host-side helper that reads settings, and it imports them lazily.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from runtime.llm.spec import LLM_PROVIDER_KINDS, THINKING_LEVELS

ENVELOPE_VERSION = 1
MAX_ENVELOPE_BYTES = 4 * 1024 * 1024  # one stdin line; a bigger envelope is a host bug

ROUTES = ("worker-local", "main-process-proxy")
SANDBOX_MODES = ("none", "bwrap")
APPROVAL_MODES = ("auto", "ask_changes", "ask_all", "plan_only")  # toolcatalog.policy's, weakest first

#: The settings the child's tools read (toolcatalog), copied by the host into the envelope and
#: given to ``django.conf.settings.configure`` in the child: the same limits and sandbox binary as
#: the parent, without the parent's settings module, database or secret key.
TOOL_SETTING_NAMES = (
    "NETA_BASH_MAX_PROCESSES",
    "NETA_BASH_MAX_FILE_MB",
    "NETA_BASH_MAX_OPEN_FILES",
    "NETA_BASH_MAX_MEMORY_MB",
    "NETA_BASH_MAX_TIMEOUT",
    "NETA_SANDBOX_BWRAP",
    "NETA_SANDBOX_RO_BINDS",
    "NETA_TOOL_OUTPUT_DIR",
    "NETA_TOOLS_NO_CGROUP",
    # web_fetch runs in the child (worker-local): the same guard lists and limits.
    "NETA_WEB_FETCH_ALLOW",
    "NETA_WEB_FETCH_DENY",
    "NETA_WEB_FETCH_MAX_BYTES",
    "NETA_WEB_FETCH_TIMEOUT",
    "NETA_WEB_FETCH_MAX_REDIRECTS",
)


class EnvelopeError(ValueError):
    """The envelope is not valid; the message names the path and the problem."""


# --------------------------------------------------------------------------- checkers


def _fail(where: str, problem: str):
    raise EnvelopeError(f"{where}: {problem}")


def _str(*, empty: bool = True, max_len: int | None = None) -> Callable[[str, Any], str]:
    def check(where: str, value: Any) -> str:
        if not isinstance(value, str):
            _fail(where, f"must be a string, got {type(value).__name__}")
        if not empty and not value:
            _fail(where, "must not be empty")
        if max_len is not None and len(value) > max_len:
            _fail(where, f"must be at most {max_len} characters, got {len(value)}")
        return value

    return check


def _opt(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def optional(where: str, value: Any) -> Any:
        return None if value is None else check(where, value)

    return optional


def _int(minimum: int = 0) -> Callable[[str, Any], int]:
    def check(where: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            _fail(where, f"must be an integer >= {minimum}, got {value!r}")
        return value

    return check


def _number(*, positive: bool = False) -> Callable[[str, Any], float]:
    def check(where: str, value: Any) -> float:
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        if not ok or value < 0 or (positive and value == 0):
            _fail(where, f"must be a number {'> 0' if positive else '>= 0'}, got {value!r}")
        return value

    return check


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        _fail(where, f"must be true or false, got {value!r}")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(where: str, value: Any) -> str:
        if value not in options:
            _fail(where, f"must be one of {', '.join(options)}, got {value!r}")
        return value

    return check


def _dict(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        _fail(where, f"must be an object, got {type(value).__name__}")
    return value


def _str_list(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        _fail(where, f"must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            _fail(f"{where}[{i}]", f"must be a non-empty string, got {item!r}")
    return tuple(value)


def _list_of(parse: Callable[[str, Any], Any]) -> Callable[[str, Any], tuple]:
    def check(where: str, value: Any) -> tuple:
        if not isinstance(value, list):
            _fail(where, f"must be a list, got {type(value).__name__}")
        return tuple(parse(f"{where}[{i}]", item) for i, item in enumerate(value))

    return check


def _nested(cls) -> Callable[[str, Any], Any]:
    def check(where: str, value: Any) -> Any:
        return cls.parse(value, where=where)

    return check


_MISSING = object()


def _spec(key: str, check: Callable[[str, Any], Any], default: Any = _MISSING) -> dict:
    """Field metadata: the wire key, its checker, and a default (absent: required)."""
    return {"key": key, "check": check, "default": default}


def _meta(key, check, default=_MISSING, **kw):
    if default is _MISSING:
        return field(metadata=_spec(key, check), **kw)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=_spec(key, check, default))
    return field(default=default, metadata=_spec(key, check, default))


class _Wire:
    """Strict parse from / plain dump to the camelCase wire form, driven by field metadata."""

    @classmethod
    def parse(cls, data: Any, *, where: str):
        data = _dict(where, data)
        known = {f.metadata["key"]: f for f in fields(cls)}
        extra = sorted(set(data) - set(known))
        if extra:
            _fail(where, f"unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(sorted(known))}")
        values = {}
        for key, f in known.items():
            meta = f.metadata
            if key not in data:
                if meta["default"] is _MISSING:
                    _fail(f"{where}.{key}", "is required")
                continue
            values[f.name] = meta["check"](f"{where}.{key}", data[key])
        obj = cls(**values)
        obj.check(where)
        return obj

    def check(self, where: str) -> None:
        """Cross-field rules (subclasses)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.metadata["key"]] = _dump(value)
        return out


def _dump(value: Any) -> Any:
    if isinstance(value, _Wire):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True, kw_only=True)
class ToolGrant(_Wire):
    """One tool the child may call: where it runs, and what the model is told about it.

    ``worker-local`` tools run inside the child (the child knows them from
    ``toolcatalog.builtins``); ``main-process-proxy`` tools are sent to the host as a
    ``proxy_request``. The definition travels so the child needs no registry for proxy tools.
    """

    name: str = _meta("name", _str(empty=False, max_len=64))
    route: str = _meta("route", _choice(ROUTES))
    description: str = _meta("description", _str(), "")
    parameters: dict = _meta("parameters", _dict, {"type": "object", "properties": {}})

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, kw_only=True)
class ToolPolicy(_Wire):
    """The child's effective tools (already the parent's ∩ the child agent's ∩ the subagent
    policy, computed by the host), and what bash may see."""

    tools: tuple[ToolGrant, ...] = _meta("tools", _list_of(_nested(ToolGrant)))
    env_passthrough: tuple[str, ...] = _meta("envPassthrough", _str_list, ())
    network: bool = _meta("network", _bool, False)

    def check(self, where: str) -> None:
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            _fail(f"{where}.tools", f"names a tool twice: {', '.join(dupes)}")

    def grant(self, name: str) -> ToolGrant | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True, kw_only=True)
class ModelRef(_Wire):
    """The ``ModelSpec`` the child streams with, minus the key: ``apiKeyEnv`` names the one
    environment variable the supervisor passes through (empty: no key, e.g. scripted)."""

    provider_kind: str = _meta("providerKind", _choice(LLM_PROVIDER_KINDS))
    model_id: str = _meta("modelId", _str(empty=False))
    provider_name: str = _meta("providerName", _str(empty=False))
    base_url: str | None = _meta("baseUrl", _opt(_str()), None)
    api_key_env: str = _meta("apiKeyEnv", _str(max_len=200), "")
    context_window: int = _meta("contextWindow", _int(1), 128000)
    max_output_tokens: int = _meta("maxOutputTokens", _int(1), 8192)
    supports_tools: bool = _meta("supportsTools", _bool, True)
    supports_thinking: bool = _meta("supportsThinking", _bool, False)
    supports_images: bool = _meta("supportsImages", _bool, False)
    prices: dict = _meta("prices", _dict, {})
    options: dict = _meta("options", _dict, {})
    name: str = _meta("name", _str(max_len=200), "")  # the configured model's name (its trace records say it)

    def check(self, where: str) -> None:
        if self.api_key_env and not (self.api_key_env.replace("_", "a").isalnum() and not self.api_key_env[0].isdigit()):
            _fail(f"{where}.apiKeyEnv", f"is not an environment variable name: {self.api_key_env!r}")


@dataclass(frozen=True, kw_only=True)
class SandboxConfig(_Wire):
    """How the parent's tools are confined, so the child's are confined the same way.

    ``mode`` is the parent's *resolved* sandbox (``none`` or ``bwrap``), ``protectedPaths``
    the paths no tool touches (toolcatalog.protected_paths, computed by the host),
    ``toolSettings`` the NETA_* tool settings (:data:`TOOL_SETTING_NAMES`)."""

    mode: str = _meta("mode", _choice(SANDBOX_MODES))
    protected_paths: tuple[str, ...] = _meta("protectedPaths", _str_list, ())
    tool_settings: dict = _meta("toolSettings", _dict, {})

    def check(self, where: str) -> None:
        extra = sorted(set(self.tool_settings) - set(TOOL_SETTING_NAMES))
        if extra:
            _fail(f"{where}.toolSettings", f"unknown setting(s) {', '.join(extra)}; allowed: {', '.join(TOOL_SETTING_NAMES)}")


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig(_Wire):
    model: ModelRef = _meta("model", _nested(ModelRef))
    thinking_level: str = _meta("thinkingLevel", _choice(THINKING_LEVELS), "off")
    cwd: str = _meta("cwd", _str(empty=False))
    workspace_roots: tuple[str, ...] = _meta("workspaceRoots", _str_list)
    sandbox: SandboxConfig = _meta("sandbox", _nested(SandboxConfig))
    # A model call whose stream broke after its output began is made again this many times,
    # after base × 1, 2, 4 … ms (the parent's NETA_LLM_RETRIES / NETA_LLM_RETRY_BASE_MS).
    llm_retries: int = _meta("llmRetries", _int(0), 0)
    llm_retry_base_ms: int = _meta("llmRetryBaseMs", _int(0), 2000)

    def check(self, where: str) -> None:
        if not self.workspace_roots:
            _fail(f"{where}.workspaceRoots", "needs at least one root")
        for key, value in (("cwd", self.cwd), *((f"workspaceRoots[{i}]", r) for i, r in enumerate(self.workspace_roots))):
            if not value.startswith("/"):
                _fail(f"{where}.{key}", f"must be an absolute path, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Limits(_Wire):
    """Budgets. The child enforces turns, tool calls, tokens, cost and wall clock itself (a stop is
    ``run_end`` status ``partial``); the host enforces wall clock (plus a grace) and idle again."""

    max_turns: int = _meta("maxTurns", _int(1), 20)
    max_tool_calls: int = _meta("maxToolCalls", _int(0), 50)
    max_tokens: int | None = _meta("maxTokens", _opt(_int(1)), None)
    max_cost: float | None = _meta("maxCost", _opt(_number(positive=True)), None)  # USD
    wall_clock_seconds: float = _meta("wallClockSeconds", _number(positive=True), 600.0)
    idle_seconds: float = _meta("idleSeconds", _number(positive=True), 60.0)
    heartbeat_seconds: float = _meta("heartbeatSeconds", _number(positive=True), 2.0)

    def check(self, where: str) -> None:
        if self.heartbeat_seconds >= self.idle_seconds:
            _fail(f"{where}.heartbeatSeconds", f"must be below idleSeconds ({self.idle_seconds}), got {self.heartbeat_seconds}")


@dataclass(frozen=True, kw_only=True)
class ApprovalRule(_Wire):
    """An "allow for this session" rule of the parent session: this tool, or (bash) the
    commands that start with ``prefix``."""

    tool: str = _meta("tool", _str(empty=False, max_len=64))
    prefix: str = _meta("prefix", _str(max_len=500), "")


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy(_Wire):
    """Which of the child's calls wait for a person (docs/subagents.md, "Approvals"): the
    stricter of the child agent's mode and the parent session's mode in force, the parent
    session's rules, the proxy tools that change something (the child has no registry for
    them), and how long a request waits before it is denied."""

    mode: str = _meta("mode", _choice(APPROVAL_MODES), "auto")
    rules: tuple[ApprovalRule, ...] = _meta("rules", _list_of(_nested(ApprovalRule)), ())
    changing_proxy_tools: tuple[str, ...] = _meta("changingProxyTools", _str_list, ())
    timeout_seconds: float = _meta("timeoutSeconds", _number(positive=True), 3600.0)


@dataclass(frozen=True, kw_only=True)
class TaskEnvelope(_Wire):
    v: int = _meta("v", _int(1))
    run_id: str = _meta("runId", _str(empty=False, max_len=64))
    session_id: str = _meta("sessionId", _str(empty=False, max_len=64))
    parent_entry_id: str = _meta("parentEntryId", _str(max_len=64))
    parent_run_id: str = _meta("parentRunId", _str(max_len=64))
    batch_id: str = _meta("batchId", _str(empty=False, max_len=64))
    tool_call_id: str = _meta("toolCallId", _str(empty=False, max_len=200))
    task_index: int = _meta("taskIndex", _int(0))
    depth: int = _meta("depth", _int(1))
    agent: str = _meta("agent", _str(empty=False, max_len=200))
    task: str = _meta("task", _str(empty=False))
    restricted_system_prompt: str = _meta("restrictedSystemPrompt", _str())
    tool_policy: ToolPolicy = _meta("toolPolicy", _nested(ToolPolicy))
    allowed_skills: tuple[str, ...] = _meta("allowedSkills", _str_list, ())
    context_summary: str = _meta("contextSummary", _str(), "")
    runtime_config: RuntimeConfig = _meta("runtimeConfig", _nested(RuntimeConfig))
    limits: Limits = _meta("limits", _nested(Limits))
    deadline: int | None = _meta("deadline", _opt(_int(0)), None)  # epoch ms; absent: limits only
    # The delegating policy, for the host's re-check of a delegate proxy call (the child only
    # sees the delegate tools it was granted): {"rootAgent", "policy"}; empty: no delegation.
    delegation: dict = _meta("delegation", _dict, {})
    approval: ApprovalPolicy = _meta("approval", _nested(ApprovalPolicy), ApprovalPolicy())

    def check(self, where: str) -> None:
        if self.v != ENVELOPE_VERSION:
            _fail(f"{where}.v", f"version {self.v} is not known to this child (it speaks {ENVELOPE_VERSION})")

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))


def parse_envelope(data: str | bytes | Mapping[str, Any]) -> TaskEnvelope:
    """A JSON line (or its parsed object) → a validated envelope; raises EnvelopeError."""
    if isinstance(data, (str, bytes)):
        if len(data) > MAX_ENVELOPE_BYTES:
            raise EnvelopeError(f"envelope: {len(data)} bytes; the limit is {MAX_ENVELOPE_BYTES}")
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise EnvelopeError(f"envelope: not JSON: {exc}") from None
    if isinstance(data, dict) and "v" in data and data["v"] != ENVELOPE_VERSION and isinstance(data["v"], int):
        # Say the version problem first: the rest may legitimately differ in another version.
        raise EnvelopeError(f"envelope.v: version {data['v']} is not known to this child (it speaks {ENVELOPE_VERSION})")
    return TaskEnvelope.parse(data, where="envelope")


def tool_settings_from_django() -> dict[str, Any]:
    """Host side: the NETA_* tool settings of this process (for ``SandboxConfig.toolSettings``)."""
    from django.conf import (
        settings,  # host side only: the child imports this module without Django
    )

    if not settings.configured:
        return {}
    out = {}
    for name in TOOL_SETTING_NAMES:
        if hasattr(settings, name):
            value = getattr(settings, name)
            out[name] = [str(v) for v in value] if isinstance(value, (list, tuple)) else (str(value) if hasattr(value, "__fspath__") else value)
    return out
