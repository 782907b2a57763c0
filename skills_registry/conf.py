"""The registry's configuration, read from Django settings.

Every ``NETA_SKILL*`` variable is read once in ``neta/settings.py`` (README's
configuration table); the fallbacks below only serve settings modules that
leave one out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from skills_registry.diagnostics import VALIDATION_MODES
from skills_registry.discovery import SkillRoot, default_roots


def validation_mode() -> str:
    mode = getattr(settings, "NETA_SKILLS_VALIDATION", "strict")
    if mode not in VALIDATION_MODES:
        raise ImproperlyConfigured(f"NETA_SKILLS_VALIDATION must be one of {', '.join(VALIDATION_MODES)}, not {mode!r}")
    return mode


def managed_dir() -> Path:
    """Where imported skills live (``<managed>/<scope>/<name>``)."""
    configured = getattr(settings, "NETA_MANAGED_SKILLS_DIR", None)
    return Path(configured) if configured else Path(settings.VAR_DIR) / "skills"


def project_dir() -> Path:
    """The folder whose project skills the registry holds (default: the process cwd)."""
    configured = getattr(settings, "NETA_SKILLS_PROJECT_DIR", None)
    return Path(configured) if configured else Path(os.getcwd())


def user_home() -> Path:
    configured = settings.NETA_SKILLS_HOME
    return Path(configured) if configured else Path.home()


def max_entry_bytes() -> int:
    return int(settings.NETA_SKILL_MAX_ENTRY_BYTES)


def file_read_limit() -> int:
    """The most bytes ``read_skill_file`` returns (larger files are refused)."""
    return int(getattr(settings, "NETA_SKILL_FILE_MAX_BYTES", 256 * 1024))


@dataclass(frozen=True, slots=True)
class ImportLimits:
    max_files: int = 1000
    max_total_bytes: int = 50 * 1024 * 1024
    max_ratio: int = 200  # uncompressed:compressed, checked for entries over ratio_floor
    ratio_floor: int = 1024 * 1024
    max_depth: int = 32
    max_path_length: int = 1024


def import_limits() -> ImportLimits:
    defaults = ImportLimits()
    return ImportLimits(
        max_files=int(getattr(settings, "NETA_SKILL_IMPORT_MAX_FILES", defaults.max_files)),
        max_total_bytes=int(getattr(settings, "NETA_SKILL_IMPORT_MAX_BYTES", defaults.max_total_bytes)),
    )


def configured_roots(*, cwd: Path | None = None, home: Path | None = None) -> list[SkillRoot]:
    return default_roots(
        cwd=cwd or project_dir(),
        home=home or user_home(),
        workspace_dirs=list(getattr(settings, "NETA_SKILLS_DIRS", []) or []),
        managed_dir=managed_dir(),
        base_dir=Path(settings.BASE_DIR),
    )
