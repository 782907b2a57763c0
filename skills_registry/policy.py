"""An agent's skill policy: which skills it (and its subagents) may use, and the index budget.

The policy is a plain dict (stored as JSON on the runtime's ``Agent``)::

    {
        "allowed": "all",                 # or a list of skill names
        "subagent_allowed": ["lint"],     # the subagent whitelist (default: none)
        "include": ["lint"],              # listed first in the prompt index
        "exclude": ["huge-skill"],        # never listed in the index (still loadable)
        "index_budget_chars": 8000,       # optional; null = no limit
        "index_budget_tokens": null,      # optional; tokens are estimated as chars / 4
    }

:meth:`SkillPolicy.from_dict` refuses anything else with a
:class:`SkillPolicyError` that names the field. A subagent sees a skill only
when the agent may use it, it is on ``subagent_allowed``, staff allow it in
subagents, and it is not marked ``requires_privilege``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIELDS = ("allowed", "subagent_allowed", "include", "exclude", "index_budget_chars", "index_budget_tokens")
MAX_NAMES = 10000
MAX_NAME_LENGTH = 255


class SkillPolicyError(ValueError):
    """A skill policy dict is invalid; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"skill policy: {field}: {message}")
        self.field = field
        self.message = message


def _names(data: dict[str, Any], field: str) -> tuple[str, ...]:
    value = data.get(field, [])
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise SkillPolicyError(field, f"must be a list of skill names, not {type(value).__name__}")
    if len(value) > MAX_NAMES:
        raise SkillPolicyError(field, f"lists more than {MAX_NAMES} names")
    names: list[str] = []
    for index, name in enumerate(value):
        if not isinstance(name, str) or not name.strip():
            raise SkillPolicyError(f"{field}[{index}]", "must be a non-empty string")
        if len(name) > MAX_NAME_LENGTH:
            raise SkillPolicyError(f"{field}[{index}]", f"is longer than {MAX_NAME_LENGTH} characters")
        if name in names:
            raise SkillPolicyError(f"{field}[{index}]", f"repeats {name!r}")
        names.append(name)
    return tuple(names)


def _budget(data: dict[str, Any], field: str) -> int | None:
    value = data.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SkillPolicyError(field, f"must be a positive integer or null, not {value!r}")
    if value <= 0:
        raise SkillPolicyError(field, f"must be a positive integer or null, not {value}")
    return value


@dataclass(frozen=True, slots=True)
class SkillPolicy:
    allowed: str | tuple[str, ...] = "all"
    subagent_allowed: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    index_budget_chars: int | None = None
    index_budget_tokens: int | None = None

    @classmethod
    def from_dict(cls, data: Any) -> SkillPolicy:
        if data is None:
            return cls()
        if isinstance(data, SkillPolicy):
            return data
        if not isinstance(data, dict):
            raise SkillPolicyError("(policy)", f"must be an object, not {type(data).__name__}")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise SkillPolicyError(unknown[0], f"unknown field (known: {', '.join(FIELDS)})")
        raw_allowed = data.get("allowed", "all")
        if raw_allowed == "all":
            allowed: str | tuple[str, ...] = "all"
        elif isinstance(raw_allowed, str):
            raise SkillPolicyError("allowed", f'must be "all" or a list of skill names, not {raw_allowed!r}')
        else:
            allowed = _names(data, "allowed")
        include = _names(data, "include")
        exclude = _names(data, "exclude")
        both = sorted(set(include) & set(exclude))
        if both:
            raise SkillPolicyError("include", f"{both[0]!r} is also in exclude")
        return cls(
            allowed=allowed,
            subagent_allowed=_names(data, "subagent_allowed"),
            include=include,
            exclude=exclude,
            index_budget_chars=_budget(data, "index_budget_chars"),
            index_budget_tokens=_budget(data, "index_budget_tokens"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed if self.allowed == "all" else list(self.allowed),
            "subagent_allowed": list(self.subagent_allowed),
            "include": list(self.include),
            "exclude": list(self.exclude),
            "index_budget_chars": self.index_budget_chars,
            "index_budget_tokens": self.index_budget_tokens,
        }

    def name_allowed(self, name: str, *, for_subagent: bool) -> tuple[bool, str]:
        """Whether the policy lets the agent (or its subagents) use ``name``, and why."""
        if self.allowed != "all" and name not in self.allowed:
            return False, "not in the agent's allowed skills"
        if for_subagent and name not in self.subagent_allowed:
            return False, "not on the subagent whitelist"
        return True, "allowed by the agent's policy"

