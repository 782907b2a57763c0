"""Skill diagnostics: every problem discovery finds, with a stable code.

A diagnostic belongs to one skill file (or, for a missing root, to a root
path). Its ``code`` never changes meaning; staff pages, the ``skills_sync``
output and tests key on it. ``severity`` depends on the validation mode:

* ``strict`` (Neta's default): every frontmatter problem is an ``error`` and
  the skill is registered with status ``invalid``; it is never offered to a
  model.
* ``pi``: Pi's own leniency. The problems Pi only warns about (name rules,
  an over-long description) are ``warning`` and the skill stays usable; the
  problems that make Pi skip a skill stay ``error``.

``pi_kind`` is what Pi calls the same finding (``warning`` or ``collision``;
``None`` for checks Pi does not make) and ``pi_message`` is Pi's wording, so
Neta's findings can be compared with Pi's loader (see the oracle test).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VALIDATION_MODES = ("strict", "pi")


@dataclass(frozen=True, slots=True)
class DiagnosticCode:
    code: str
    summary: str
    pi_kind: str | None  # "warning" / "collision" / None (a Neta-only check)
    pi_loads: bool  # whether Pi still loads the skill despite this finding
    always_warning: bool = False  # informative in every mode (collisions, caps)


_CODES = (
    DiagnosticCode("file-unreadable", "the skill file cannot be read", "warning", False),
    DiagnosticCode("file-too-large", "the skill file is larger than the registry accepts", None, False),
    DiagnosticCode("file-not-utf8", "the skill file is not valid UTF-8", None, True),
    DiagnosticCode("frontmatter-unterminated", "the file starts with '---' but no closing '---' line follows", "warning", False),
    DiagnosticCode("yaml-invalid", "the frontmatter is not valid YAML", "warning", False),
    DiagnosticCode("yaml-duplicate-key", "the frontmatter repeats a key", "warning", False),
    DiagnosticCode("frontmatter-not-mapping", "the frontmatter is not a key/value mapping", "warning", False),
    DiagnosticCode("frontmatter-too-complex", "the frontmatter is too large or too deeply aliased", None, False),
    DiagnosticCode("description-missing", "description is required", "warning", False),
    DiagnosticCode("description-not-string", "description must be a string", "warning", False),
    DiagnosticCode("description-too-long", "description exceeds 1024 characters", "warning", True),
    DiagnosticCode("name-not-string", "name must be a string", None, False),
    DiagnosticCode("name-mismatch", "name differs from the skill's folder name", "warning", True),
    DiagnosticCode("name-too-long", "name exceeds 64 characters", "warning", True),
    DiagnosticCode("name-invalid-chars", "name uses characters outside a-z, 0-9 and '-'", "warning", True),
    DiagnosticCode("name-hyphen-edge", "name starts or ends with a hyphen", "warning", True),
    DiagnosticCode("name-consecutive-hyphens", "name contains '--'", "warning", True),
    DiagnosticCode("field-invalid", "a known frontmatter field has the wrong type", None, True),
    DiagnosticCode("collision", "another skill with the same name has precedence", "collision", True, True),
    DiagnosticCode("too-many-files", "the skill folder holds more files than are listed", None, True, True),
    DiagnosticCode("root-missing", "a configured skill root does not exist or is not a folder", "warning", True, True),
)

CODES: dict[str, DiagnosticCode] = {c.code: c for c in _CODES}


def severity_for(code: str, mode: str) -> str:
    """``error`` (the skill is invalid) or ``warning`` for ``code`` under ``mode``."""
    spec = CODES[code]
    if spec.always_warning:
        return "warning"
    if mode == "pi" and spec.pi_loads:
        return "warning"
    return "error"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: str
    message: str
    path: str
    pi_message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        code: str,
        message: str,
        *,
        path: str,
        mode: str,
        pi_message: str | None = None,
        **extra: Any,
    ) -> Diagnostic:
        if code not in CODES:
            raise ValueError(f"unknown diagnostic code {code!r}")
        return cls(code, severity_for(code, mode), message, path, pi_message, dict(extra))

    @property
    def pi_kind(self) -> str | None:
        return CODES[self.code].pi_kind

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
        }
        if self.pi_message is not None:
            out["pi_message"] = self.pi_message
        if self.extra:
            out.update(self.extra)
        return out


def has_errors(diagnostics: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)
