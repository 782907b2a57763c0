"""The schema of ``ModelSpec.options`` (docs/llm.md, "Options"): which keys each provider kind
reads and what each must hold. ``ModelConfig.clean`` refuses what this refuses, so a model
row the console or any other writer saves cannot fail later, mid-run, on a bad option.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .spec import THINKING_LEVELS

WIRE_KINDS = ("anthropic", "openai", "openai-responses", "openai-compatible")
OPENAI_KINDS = ("openai", "openai-responses", "openai-compatible")


def _number(minimum: float, *, strict: bool = False, integer: bool = False) -> Callable[[object], str | None]:
    def check(value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            return f"must be {'a whole number' if integer else 'a number'}, got {value!r}"
        if value < minimum or (strict and value == minimum):
            return f"must be {'>' if strict else '>='} {minimum:g}, got {value!r}"
        return None

    return check


def _choice(*allowed: str) -> Callable[[object], str | None]:
    def check(value) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}, got {value!r}"

    return check


def _text(value) -> str | None:
    return None if isinstance(value, str) and value else f"must be a non-empty string, got {value!r}"


def _flag(value) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


def _by_level(check_value: Callable[[object], str | None]) -> Callable[[object], str | None]:
    def check(value) -> str | None:
        if not isinstance(value, dict):
            return f"must be an object of thinking level → value, got {value!r}"
        for level, item in value.items():
            if level not in THINKING_LEVELS:
                return f"has unknown thinking level {level!r} (levels: {', '.join(THINKING_LEVELS)})"
            problem = check_value(item)
            if problem:
                return f"[{level}] {problem}"
        return None

    return check


def _levels(value) -> str | None:
    if not isinstance(value, list) or not value or not all(isinstance(level, str) for level in value):
        return f"must be a non-empty list of thinking levels, got {value!r}"
    unknown = [level for level in value if level not in THINKING_LEVELS]
    if unknown:
        return f"has unknown thinking level {unknown[0]!r} (levels: {', '.join(THINKING_LEVELS)})"
    return None


# option → (the kinds that read it, its check)
SCHEMA: dict[str, tuple[tuple[str, ...], Callable[[object], str | None]]] = {
    "max_retries": (WIRE_KINDS, _number(0, integer=True)),
    "retry_base_delay": (WIRE_KINDS, _number(0)),
    "retry_max_delay": (WIRE_KINDS, _number(0)),
    "retry_max_wait": (WIRE_KINDS, _number(0)),
    "timeout": (WIRE_KINDS, _number(0, strict=True)),
    "connect_timeout": (WIRE_KINDS, _number(0, strict=True)),
    "thinking_levels": (WIRE_KINDS, _levels),
    "cache": (("anthropic",), _choice("none", "short", "long")),
    "thinking_budgets": (("anthropic",), _by_level(_number(1, integer=True))),
    "adaptive_thinking": (("anthropic",), _flag),
    "thinking_effort": (("anthropic",), _by_level(_text)),
    "thinking_display": (("anthropic",), _text),
    "interleaved_thinking": (("anthropic",), _flag),
    "reasoning_effort": (OPENAI_KINDS, _by_level(_text)),
    "reasoning_summary": (("openai-responses",), _choice("auto", "concise", "detailed")),
    "max_tokens_field": (OPENAI_KINDS, _choice("max_tokens", "max_completion_tokens")),
    "system_role": (OPENAI_KINDS, _choice("system", "developer")),
    "thinking_format": (("openai-compatible",), _text),
    "rules": (("scripted",), lambda value: None),  # checked below: it is read, like a run would
    "delay_ms": (("scripted",), _number(0)),
    "chunk_size": (("scripted",), _number(0, integer=True)),
}


def known_options(kind: str) -> list[str]:
    return sorted(name for name, (kinds, _check) in SCHEMA.items() if kind in kinds)


RULES_SUFFIXES = (".yaml", ".yml", ".json")


class RulesFileRefused(ValueError):
    """A scripted model's ``rules`` names no rules file in the folders rules may come from."""


def rules_file(value: str, *, base_dir: str | os.PathLike | None, rules_dirs: tuple[str, ...]) -> str:
    """The real path of the rules file ``value`` names, which must lie in one of ``rules_dirs``
    (the shipped rules, ``NETA_SCRIPTED_RULES_DIR``) and end in .yaml, .yml or .json. A relative
    name is looked up in each of those folders, then in ``base_dir`` (the checkout: the shipped
    ``runtime/llm/scripted_demo.yaml``). The error names the rule, never the file's content or
    whether a file outside those folders exists."""
    roots = [os.path.realpath(d) for d in rules_dirs]
    if os.path.isabs(value):
        candidates = [value]
    else:
        candidates = [os.path.join(d, value) for d in rules_dirs] + ([os.path.join(base_dir, value)] if base_dir is not None else [])
    for candidate in candidates:
        real = os.path.realpath(candidate)
        inside = any(real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
        if inside and Path(real).suffix.lower() in RULES_SUFFIXES and os.path.isfile(real):
            return real
    raise RulesFileRefused(
        f"{value!r} is not a rules file (.yaml, .yml or .json) in the shipped rules or NETA_SCRIPTED_RULES_DIR: "
        "put the file in that folder and name it relative to it"
    )


def option_errors(kind: str, options, *, base_dir: str | os.PathLike | None = None, rules_dirs: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with ``options`` for a model of ``kind`` (empty: nothing). A scripted
    model's ``rules`` are loaded and parsed, so a missing or broken rules file is named here;
    a rules file must lie in ``rules_dirs`` (:func:`rules_file`)."""
    if not isinstance(options, dict):
        return ["must be a JSON object"]
    problems = []
    for name, value in options.items():
        spec = SCHEMA.get(name)
        if spec is None or kind not in spec[0]:
            known = ", ".join(known_options(kind)) or "none"
            problems.append(f"unknown option {name!r} for a {kind} model (known: {known})")
            continue
        problem = spec[1](value)
        if problem:
            problems.append(f"{name} {problem}")
    if kind == "scripted" and "rules" in options:
        from .scripted import ScriptedRulesError, load_script  # parses YAML: loaded only to check a scripted model

        rules = options["rules"]
        if not isinstance(rules, (dict, str)):
            problems.append(f"rules must be an object of rules or a file path, got {type(rules).__name__}")
        else:
            try:
                load_script(rules_file(rules, base_dir=base_dir, rules_dirs=rules_dirs) if isinstance(rules, str) else rules)
            except (ScriptedRulesError, RulesFileRefused) as exc:
                problems.append(f"rules: {exc}")
    return problems
