"""``Agent.subagent_policy``: which child agents a parent may delegate to, and how (docs/subagents.md).

The stored form is a JSON object with snake_case keys (like ``tool_policy``)::

    {
      "enabled": true,
      "agents": ["default", "researcher"],      # child agents (other Agent rows) it may name
      "max_depth": 1,                           # a child at this depth gets no delegate tools
      "max_tasks_per_call": 8,                  # delegate_parallel / delegate_chain
      "max_concurrency": 4,                     # children running at once per parent run
      "max_concurrency_per_session": 8,         # … and per session (every run of it)
      "child_budget": {"max_turns": 20, "max_tool_calls": 50, "max_tokens": null,
                       "max_cost": null, "wall_clock_seconds": 600, "idle_seconds": 60},
      "batch_budget": {"max_turns": null, "max_tool_calls": null, "max_tokens": null,
                       "max_cost": null, "wall_clock_seconds": null},  # the whole subtree
      "tools": {"allow": null, "deny": ["bash"]},  # allow: null = whatever the intersection gives
      "skills": ["pdf-tools"],                  # the skill allowlist (empty: no skills)
      "result_chars_per_child": 50000,          # caps of the delegate call's tool result
      "result_chars_per_batch": 200000
    }

Every key is optional (an empty object is a disabled policy with the defaults). Parsing is
strict: an unknown key, a wrong type or an impossible value is a :class:`SubagentPolicyError`
naming the key (``subagent_policy.child_budget.max_turns: must be an integer from 1 to 1000,
got 0``); the console's form and the API show that text. Isolation is not a setting: a child
is always a separate OS process.

Plain Python: the checks that need the database (do the named agents exist?) are the
caller's (``Agent.clean`` passes ``known_agents``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_MAX_DEPTH = 1
DEFAULT_TASKS_PER_CALL = 8
DEFAULT_CONCURRENCY = 4
DEFAULT_SESSION_CONCURRENCY = 8
DEFAULT_RESULT_CHARS_PER_CHILD = 50_000
DEFAULT_RESULT_CHARS_PER_BATCH = 200_000

#: Hard ceilings: a policy may ask for less, never for more.
MAX_DEPTH = 4
MAX_TASKS_PER_CALL = 32
MAX_CONCURRENCY = 16
MAX_SESSION_CONCURRENCY = 64


class SubagentPolicyError(ValueError):
    """The policy is invalid; the message names every problem (``key: problem``; …)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{where}: {what}" for where, what in problems))


class _Checker:
    def __init__(self, where: str):
        self.where = where
        self.problems: list[tuple[str, str]] = []

    def fail(self, key: str, what: str) -> None:
        self.problems.append((f"{self.where}.{key}" if key else self.where, what))

    def object(self, key: str, value: Any, allowed: Iterable[str]) -> dict:
        if not isinstance(value, Mapping):
            self.fail(key, f"must be an object, got {type(value).__name__}")
            return {}
        extra = sorted(set(value) - set(allowed))
        if extra:
            self.fail(key, f"unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(sorted(allowed))}")
        return dict(value)

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {value!r}")
            return default
        return value

    def integer(self, key: str, value: Any, default: int | None, lo: int, hi: int, *, nullable: bool = False) -> int | None:
        if value is None:
            return None if nullable else default
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            self.fail(key, f"must be an integer from {lo} to {hi}{' or null' if nullable else ''}, got {value!r}")
            return default
        return value

    def number(self, key: str, value: Any, default: float | None, lo: float, hi: float, *, nullable: bool = False) -> float | None:
        if value is None:
            return None if nullable else default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo < value <= hi:
            self.fail(key, f"must be a number above {lo:g} and at most {hi:g}{' or null' if nullable else ''}, got {value!r}")
            return default
        return float(value)

    def names(self, key: str, value: Any, *, nullable: bool = False) -> tuple[str, ...] | None:
        if value is None:
            return None if nullable else ()
        if not isinstance(value, list):
            self.fail(key, f"must be a list of names, got {type(value).__name__}")
            return None if nullable else ()
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip() or len(item) > 255:
                self.fail(f"{key}[{i}]", f"must be a non-empty name, got {item!r}")
            elif item in out:
                self.fail(f"{key}[{i}]", f"names {item!r} twice")
            else:
                out.append(item)
        return tuple(out)


@dataclass(frozen=True, kw_only=True)
class ChildBudget:
    """What one child may spend (the envelope's ``limits``)."""

    max_turns: int = 20
    max_tool_calls: int = 50
    max_tokens: int | None = None
    max_cost: float | None = None  # USD
    wall_clock_seconds: float = 600.0
    idle_seconds: float = 60.0

    @classmethod
    def parse(cls, check: _Checker, key: str, data: Any) -> ChildBudget:
        if data is None:
            return cls()
        data = check.object(key, data, {f for f in cls.__dataclass_fields__})
        budget = cls(
            max_turns=check.integer(f"{key}.max_turns", data.get("max_turns"), 20, 1, 1000),
            max_tool_calls=check.integer(f"{key}.max_tool_calls", data.get("max_tool_calls"), 50, 0, 10000),
            max_tokens=check.integer(f"{key}.max_tokens", data.get("max_tokens"), None, 1, 100_000_000, nullable=True),
            max_cost=check.number(f"{key}.max_cost", data.get("max_cost"), None, 0, 10_000, nullable=True),
            wall_clock_seconds=check.number(f"{key}.wall_clock_seconds", data.get("wall_clock_seconds"), 600.0, 0, 86_400),
            idle_seconds=check.number(f"{key}.idle_seconds", data.get("idle_seconds"), 60.0, 0, 3600),
        )
        if budget.idle_seconds is not None and budget.idle_seconds < 5:
            check.fail(f"{key}.idle_seconds", f"must be at least 5 (children heartbeat every 2 s), got {budget.idle_seconds:g}")
        return budget


@dataclass(frozen=True, kw_only=True)
class BatchBudget:
    """What one delegate call may spend over its whole subtree (its children, their
    grandchildren and below, summed); null: no batch limit. The host enforces it."""

    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    wall_clock_seconds: float | None = None

    @classmethod
    def parse(cls, check: _Checker, key: str, data: Any) -> BatchBudget:
        if data is None:
            return cls()
        data = check.object(key, data, {f for f in cls.__dataclass_fields__})
        return cls(
            max_turns=check.integer(f"{key}.max_turns", data.get("max_turns"), None, 1, 100_000, nullable=True),
            max_tool_calls=check.integer(f"{key}.max_tool_calls", data.get("max_tool_calls"), None, 1, 1_000_000, nullable=True),
            max_tokens=check.integer(f"{key}.max_tokens", data.get("max_tokens"), None, 1, 1_000_000_000, nullable=True),
            max_cost=check.number(f"{key}.max_cost", data.get("max_cost"), None, 0, 100_000, nullable=True),
            wall_clock_seconds=check.number(f"{key}.wall_clock_seconds", data.get("wall_clock_seconds"), None, 0, 86_400, nullable=True),
        )


_KEYS = (
    "enabled", "agents", "max_depth", "max_tasks_per_call", "max_concurrency", "max_concurrency_per_session",
    "child_budget", "batch_budget", "tools", "skills", "result_chars_per_child", "result_chars_per_batch",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SubagentPolicy:
    enabled: bool = False
    agents: tuple[str, ...] = ()
    max_depth: int = DEFAULT_MAX_DEPTH
    max_tasks_per_call: int = DEFAULT_TASKS_PER_CALL
    max_concurrency: int = DEFAULT_CONCURRENCY
    max_concurrency_per_session: int = DEFAULT_SESSION_CONCURRENCY
    child_budget: ChildBudget = field(default_factory=ChildBudget)
    batch_budget: BatchBudget = field(default_factory=BatchBudget)
    tools_allow: tuple[str, ...] | None = None
    tools_deny: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    result_chars_per_child: int = DEFAULT_RESULT_CHARS_PER_CHILD
    result_chars_per_batch: int = DEFAULT_RESULT_CHARS_PER_BATCH

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any] | None,
        *,
        known_agents: Iterable[str] | None = None,
        known_tools: Iterable[str] | None = None,
        where: str = "subagent_policy",
    ) -> SubagentPolicy:
        """Parse and validate; raises :class:`SubagentPolicyError` listing every problem.

        ``known_agents`` / ``known_tools``: when given, names outside them are errors."""
        check = _Checker(where)
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise SubagentPolicyError([(where, f"must be a JSON object, got {type(data).__name__}")])
        data = check.object("", data, _KEYS)
        tools = check.object("tools", data.get("tools") or {}, ("allow", "deny"))
        policy = cls(
            enabled=check.boolean("enabled", data.get("enabled"), False),
            agents=check.names("agents", data.get("agents")),
            max_depth=check.integer("max_depth", data.get("max_depth"), DEFAULT_MAX_DEPTH, 1, MAX_DEPTH),
            max_tasks_per_call=check.integer("max_tasks_per_call", data.get("max_tasks_per_call"), DEFAULT_TASKS_PER_CALL, 1, MAX_TASKS_PER_CALL),
            max_concurrency=check.integer("max_concurrency", data.get("max_concurrency"), DEFAULT_CONCURRENCY, 1, MAX_CONCURRENCY),
            max_concurrency_per_session=check.integer(
                "max_concurrency_per_session", data.get("max_concurrency_per_session"), DEFAULT_SESSION_CONCURRENCY, 1, MAX_SESSION_CONCURRENCY
            ),
            child_budget=ChildBudget.parse(check, "child_budget", data.get("child_budget")),
            batch_budget=BatchBudget.parse(check, "batch_budget", data.get("batch_budget")),
            tools_allow=check.names("tools.allow", tools.get("allow"), nullable=True),
            tools_deny=check.names("tools.deny", tools.get("deny")),
            skills=check.names("skills", data.get("skills")),
            result_chars_per_child=check.integer("result_chars_per_child", data.get("result_chars_per_child"), DEFAULT_RESULT_CHARS_PER_CHILD, 1000, 10_000_000),
            result_chars_per_batch=check.integer("result_chars_per_batch", data.get("result_chars_per_batch"), DEFAULT_RESULT_CHARS_PER_BATCH, 1000, 50_000_000),
        )
        if policy.enabled and not policy.agents:
            check.fail("agents", "name at least one child agent when delegation is enabled")
        if policy.result_chars_per_batch < policy.result_chars_per_child:
            check.fail("result_chars_per_batch", f"must be at least result_chars_per_child ({policy.result_chars_per_child})")
        if known_agents is not None:
            known = set(known_agents)
            for i, name in enumerate(policy.agents):
                if name not in known:
                    check.fail(f"agents[{i}]", f"no agent named {name!r}")
        if known_tools is not None:
            known = set(known_tools)
            for key, names in (("tools.allow", policy.tools_allow or ()), ("tools.deny", policy.tools_deny)):
                for i, name in enumerate(names):
                    if name not in known:
                        check.fail(f"{key}[{i}]", f"no tool named {name!r}")
        if check.problems:
            raise SubagentPolicyError(check.problems)
        return policy

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "agents": list(self.agents),
            "max_depth": self.max_depth,
            "max_tasks_per_call": self.max_tasks_per_call,
            "max_concurrency": self.max_concurrency,
            "max_concurrency_per_session": self.max_concurrency_per_session,
            "child_budget": asdict(self.child_budget),
            "batch_budget": asdict(self.batch_budget),
            "tools": {"allow": None if self.tools_allow is None else list(self.tools_allow), "deny": list(self.tools_deny)},
            "skills": list(self.skills),
            "result_chars_per_child": self.result_chars_per_child,
            "result_chars_per_batch": self.result_chars_per_batch,
        }

    def delegates_at(self, depth: int) -> bool:
        """May an agent running at ``depth`` (0: the parent run) delegate?"""
        return self.enabled and depth < self.max_depth

    def allows_agent(self, name: str) -> bool:
        return name in self.agents

    def tool_decision(self, name: str) -> tuple[bool, str]:
        """The policy's own word on one tool (deny wins; an allow list narrows)."""
        if name in self.tools_deny:
            return False, "denied by the parent's subagent_policy.tools.deny"
        if self.tools_allow is not None and name not in self.tools_allow:
            return False, "not in the parent's subagent_policy.tools.allow"
        return True, ""


def parse_policy_or_disabled(data: Any) -> tuple[SubagentPolicy, str]:
    """For the runtime: (policy, "") or (a disabled policy, the error) — an invalid stored
    policy never enables delegation."""
    try:
        return SubagentPolicy.from_dict(data), ""
    except SubagentPolicyError as exc:
        return SubagentPolicy(), str(exc)


#: The delegate tools (registered by ``runtime.subagents.tools``).
DELEGATE_TOOLS = ("delegate_task", "delegate_parallel", "delegate_chain")


def effective_tool_policy(tool_policy: Any, subagent_policy: Any, *, depth: int = 0) -> tuple[dict, dict]:
    """(tool policy, runtime policy) for ``resolve_tools``: the agent's tool policy with the
    delegate tools switched on when its subagent policy lets it delegate at ``depth``, and
    denied (with the reason) otherwise. The one place that decides; the turn loop, the API
    and the console all call it. An explicit ``disabled``/``per_tool`` in the tool policy
    still turns them off (deny wins)."""
    tools = dict(tool_policy) if isinstance(tool_policy, Mapping) else {}
    policy, problem = parse_policy_or_disabled(subagent_policy)
    if policy.delegates_at(depth):
        enabled = list(tools.get("enabled") or []) if isinstance(tools.get("enabled"), list) else []
        tools["enabled"] = enabled + [n for n in DELEGATE_TOOLS if n not in enabled]
        return tools, {}
    if problem:
        why = f"the agent's subagent_policy is invalid ({problem})"
    elif not policy.enabled:
        why = "delegation is off (subagent_policy.enabled is false)"
    else:
        why = f"max subagent depth {policy.max_depth} reached"
    return tools, {"denied": {name: why for name in DELEGATE_TOOLS}}
