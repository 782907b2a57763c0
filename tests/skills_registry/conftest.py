"""Fixtures for the skill registry: isolated project/home/managed folders and a skill writer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def write_skill(
    root: Path,
    folder: str,
    *,
    name: str | None = None,
    description: str | None = "A test skill.",
    body: str = "Body.",
    extra: str = "",
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """Write ``root/folder/SKILL.md`` (frontmatter from the arguments) and extra files."""
    skill_dir = root / folder
    skill_dir.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if name is not False:
        lines.append(f"name: {name if name is not None else folder.rsplit('/', 1)[-1]}")
    if description is not None:
        lines.append(f"description: {description}")
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append("---")
    (skill_dir / "SKILL.md").write_text("\n".join(lines) + "\n" + body + "\n", encoding="utf-8")
    for rel, content in (files or {}).items():
        target = skill_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return skill_dir / "SKILL.md"


def tree_snapshot(top: Path) -> dict[str, tuple[str, int]]:
    """Every path under ``top`` (not following links) with its type and size."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[os.path.relpath(full, top)] = (oct(st.st_mode), st.st_size if not os.path.isdir(full) else 0)
    return out


@pytest.fixture
def skill_env(tmp_path, settings):
    """A project (a git repo), a home, a workspace root and a managed folder, all under tmp."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    workspace = tmp_path / "workspace-skills"
    workspace.mkdir()
    managed = tmp_path / "managed"
    settings.NETA_SKILLS_PROJECT_DIR = str(project)
    settings.NETA_SKILLS_HOME = str(home)
    settings.NETA_SKILLS_DIRS = [str(workspace)]
    settings.NETA_MANAGED_SKILLS_DIR = str(managed)
    settings.NETA_SKILLS_VALIDATION = "strict"

    class Env:
        pass

    env = Env()
    env.tmp = tmp_path
    env.project = project
    env.home = home
    env.workspace = workspace
    env.managed = managed
    env.project_skills = project / ".neta" / "skills"
    env.user_skills = home / ".neta" / "skills"
    return env
