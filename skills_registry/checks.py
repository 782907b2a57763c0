"""System checks for skill settings that cannot work together."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core import checks

from skills_registry.conf import managed_dir
from skills_registry.diagnostics import VALIDATION_MODES


@checks.register("skills")
def check_skill_settings(app_configs=None, **kwargs):
    problems = []
    mode = getattr(settings, "NETA_SKILLS_VALIDATION", "strict")
    if mode not in VALIDATION_MODES:
        problems.append(
            checks.Error(
                f"NETA_SKILLS_VALIDATION must be one of {', '.join(VALIDATION_MODES)}, not {mode!r}",
                id="skills_registry.E001",
            )
        )
    dirs = getattr(settings, "NETA_SKILLS_DIRS", []) or []
    if isinstance(dirs, (str, bytes)):
        problems.append(checks.Error("NETA_SKILLS_DIRS must be a list of folders", id="skills_registry.E002"))
        dirs = []
    for index, raw in enumerate(dirs):
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = Path(settings.BASE_DIR) / path
        if not path.is_dir():
            problems.append(
                checks.Warning(
                    f"NETA_SKILLS_DIRS[{index}] = {raw!r} is not a folder; it contributes no skills",
                    hint="Create the folder or remove it from NETA_SKILLS_DIRS.",
                    id="skills_registry.W001",
                )
            )

    managed = os.path.realpath(managed_dir())
    for index, raw in enumerate(dirs):
        real = os.path.realpath(Path(raw).expanduser())
        if managed == real or managed.startswith(real + os.sep):
            problems.append(
                checks.Error(
                    f"the managed skills folder {managed} lies inside NETA_SKILLS_DIRS[{index}]",
                    hint="Imported skills would be discovered twice; move NETA_MANAGED_SKILLS_DIR elsewhere.",
                    id="skills_registry.E003",
                )
            )
    for name in ("NETA_SKILL_IMPORT_MAX_FILES", "NETA_SKILL_IMPORT_MAX_BYTES", "NETA_SKILL_FILE_MAX_BYTES"):
        value = getattr(settings, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            problems.append(checks.Error(f"{name} must be a positive integer, not {value!r}", id="skills_registry.E004"))
    return problems
