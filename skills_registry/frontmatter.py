"""Reading a ``SKILL.md``: frontmatter split, YAML parsing and validation.

The split follows Pi exactly (``utils/frontmatter.js``): newlines are
normalized, frontmatter exists only when the text starts with ``---`` and
ends at the first ``\\n---``; the body is what follows, trimmed.

YAML is parsed with YAML 1.2 core-schema rules, like the ``yaml`` package Pi
uses, not PyYAML's YAML 1.1 defaults: ``yes``/``on`` stay strings, ``012`` is
twelve, dates stay strings, a repeated key is an error. Aliases are allowed
but the parsed value must stay small (``frontmatter-too-complex``), so a
"billion laughs" document cannot exhaust memory when stored as JSON.

Validation has Pi's rules as the floor (see :mod:`skills_registry.diagnostics`
for what each code means in the ``strict`` and ``pi`` modes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from skills_registry.diagnostics import Diagnostic, has_errors

MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
# A parsed frontmatter with more nodes than this (after alias expansion) is refused.
MAX_FRONTMATTER_NODES = 5000
MAX_FRONTMATTER_DEPTH = 32

NAME_RE = re.compile(r"^[a-z0-9-]+$")
KNOWN_FIELDS = ("name", "description", "disable-model-invocation", "version")

# JavaScript's String.prototype.trim() whitespace: WhiteSpace + LineTerminator.
_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(text: str) -> str:
    return text.strip(_JS_WS)


# --- YAML 1.2 core schema ---------------------------------------------------


class DuplicateKeyError(ConstructorError):
    pass


# libyaml's parser when PyYAML was built with it (several times faster); same results.
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Yaml12Loader(_SafeBase):
    """A safe loader with YAML 1.2 core-schema scalars and unique keys."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML signature
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise ConstructorError(
                    "while constructing a mapping", node.start_mark, "found an unhashable key", key_node.start_mark
                ) from None
            if duplicate:
                raise DuplicateKeyError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_core_int(self, node):  # noqa: ANN001
        value = self.construct_scalar(node)
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)


Yaml12Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+.0123456789"),
    ),
):
    Yaml12Loader.add_implicit_resolver(_tag, re.compile(_pattern), _first)
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", Yaml12Loader.construct_core_int)


class _TooComplex(Exception):
    pass


def json_safe(value: Any, *, budget: list[int] | None = None, depth: int = 0) -> Any:
    """``value`` as plain JSON data (string keys, finite numbers), bounded in size."""
    if budget is None:
        budget = [MAX_FRONTMATTER_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_FRONTMATTER_DEPTH:
        raise _TooComplex
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v, budget=budget, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v, budget=budget, depth=depth + 1) for v in value]
    if isinstance(value, bytes):  # !!binary
        return value.hex()
    return str(value)


# --- split -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SplitDocument:
    yaml_text: str | None  # None: no frontmatter
    body: str
    unterminated: bool = False


def split_frontmatter(text: str) -> SplitDocument:
    """Pi's ``extractFrontmatter``: returns the YAML text (or ``None``) and the trimmed body."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    if not normalized.startswith("---"):
        return SplitDocument(None, normalized)
    end = normalized.find("\n---", 3)
    if end == -1:
        return SplitDocument(None, normalized, unterminated=True)
    return SplitDocument(normalized[4:end], js_trim(normalized[end + 4 :]))


def strip_frontmatter(text: str) -> str:
    """The body of a skill file: frontmatter removed, trimmed (Pi's ``stripFrontmatter``)."""
    split = split_frontmatter(text)
    return split.body if split.yaml_text is not None else js_trim(split.body)


# --- validation ----------------------------------------------------------------


@dataclass(slots=True)
class ParsedSkill:
    """What one skill file says about itself, plus every problem found."""

    name: str
    description: str
    disable_model_invocation: bool = False
    version: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not has_errors(self.diagnostics)


def _yaml_error_message(exc: yaml.YAMLError) -> str:
    """``problem at line L, column C`` (1-based, counted from the first frontmatter line)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        context = getattr(exc, "context", None)
        prefix = f"{context}: " if context else ""
        return f"{prefix}{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).strip() or type(exc).__name__


def parse_skill_text(text: str, *, parent_dir_name: str, path: str, mode: str) -> ParsedSkill:
    """Parse and validate a skill file's text.

    ``parent_dir_name`` is the name of the folder holding the file (the
    skill's folder, or the root's folder for a loose ``.md`` file); the
    frontmatter ``name`` must equal it.
    """
    diags: list[Diagnostic] = []

    def add(code: str, message: str, pi_message: str | None = None) -> None:
        diags.append(Diagnostic.make(code, message, path=path, mode=mode, pi_message=pi_message))

    split = split_frontmatter(text)
    frontmatter: Any = {}
    if split.unterminated:
        add(
            "frontmatter-unterminated",
            "the file starts with '---' but has no closing '---' line",
            "description is required",
        )
    elif split.yaml_text:
        try:
            frontmatter = yaml.load(split.yaml_text, Loader=Yaml12Loader)  # noqa: S506 - safe loader subclass
        except DuplicateKeyError as exc:
            add("yaml-duplicate-key", f"frontmatter YAML: {_yaml_error_message(exc)}")
            return ParsedSkill(parent_dir_name, "", diagnostics=diags)
        except yaml.YAMLError as exc:
            add("yaml-invalid", f"frontmatter YAML: {_yaml_error_message(exc)}")
            return ParsedSkill(parent_dir_name, "", diagnostics=diags)
        except RecursionError:
            add("frontmatter-too-complex", "frontmatter nests too deeply")
            return ParsedSkill(parent_dir_name, "", diagnostics=diags)
        if frontmatter is None:
            frontmatter = {}
    if not isinstance(frontmatter, dict):
        add(
            "frontmatter-not-mapping",
            f"frontmatter must be a mapping of fields, not {type(frontmatter).__name__}",
            "description is required",
        )
        return ParsedSkill(parent_dir_name, "", diagnostics=diags)
    try:
        safe = json_safe(frontmatter)
    except (_TooComplex, RecursionError):
        add(
            "frontmatter-too-complex",
            f"frontmatter expands to more than {MAX_FRONTMATTER_NODES} values or nests deeper than {MAX_FRONTMATTER_DEPTH}",
        )
        return ParsedSkill(parent_dir_name, "", diagnostics=diags)

    # description (checked first, as Pi does)
    raw_description = frontmatter.get("description")
    description = ""
    if raw_description is None or raw_description == "" or raw_description is False:
        add("description-missing", "description is required", "description is required")
    elif not isinstance(raw_description, str):
        add("description-not-string", f"description must be a string, not {type(raw_description).__name__}")
    elif js_trim(raw_description) == "":
        add("description-missing", "description is required (it is blank)", "description is required")
    else:
        description = raw_description
        if len(description) > MAX_DESCRIPTION_LENGTH:
            message = f"description exceeds {MAX_DESCRIPTION_LENGTH} characters ({len(description)})"
            add("description-too-long", message, message)

    # name: frontmatter name, or the folder name when missing/empty (Pi)
    raw_name = frontmatter.get("name")
    if raw_name is None or raw_name == "":
        name = parent_dir_name
    elif isinstance(raw_name, str):
        name = raw_name
    else:
        add("name-not-string", f"name must be a string, not {type(raw_name).__name__}")
        name = parent_dir_name
    if isinstance(raw_name, str) or raw_name is None or raw_name == "":
        if name != parent_dir_name:
            message = f'name "{name}" does not match parent directory "{parent_dir_name}"'
            add("name-mismatch", message, message)
        if len(name) > MAX_NAME_LENGTH:
            message = f"name exceeds {MAX_NAME_LENGTH} characters ({len(name)})"
            add("name-too-long", message, message)
        if not NAME_RE.match(name):
            message = "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
            add("name-invalid-chars", message, message)
        if name.startswith("-") or name.endswith("-"):
            message = "name must not start or end with a hyphen"
            add("name-hyphen-edge", message, message)
        if "--" in name:
            message = "name must not contain consecutive hyphens"
            add("name-consecutive-hyphens", message, message)

    # disable-model-invocation: Pi honours exactly `true`
    raw_dmi = frontmatter.get("disable-model-invocation", False)
    if not isinstance(raw_dmi, bool):
        add(
            "field-invalid",
            f"disable-model-invocation must be true or false, not {type(raw_dmi).__name__} {raw_dmi!r}",
        )
    disable_model_invocation = raw_dmi is True

    # version: top-level `version`, else `metadata.version` (the Agent Skills spec place)
    version = ""
    raw_version = frontmatter.get("version")
    if raw_version is None and isinstance(frontmatter.get("metadata"), dict):
        raw_version = frontmatter["metadata"].get("version")
    if raw_version is not None:
        if isinstance(raw_version, bool) or not isinstance(raw_version, (str, int, float)):
            add("field-invalid", f"version must be a string or a number, not {type(raw_version).__name__}")
        else:
            version = str(raw_version)[:100]

    metadata = {k: v for k, v in safe.items() if k not in KNOWN_FIELDS}
    return ParsedSkill(
        name=name,
        description=description,
        disable_model_invocation=disable_model_invocation,
        version=version,
        metadata=metadata,
        diagnostics=diags,
    )
