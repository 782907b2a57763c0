"""Fixtures for the skill registry: isolated project/home/managed folders."""

from __future__ import annotations

import pytest


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
