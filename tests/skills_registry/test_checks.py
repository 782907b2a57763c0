"""System checks for skill settings."""

from __future__ import annotations

from skills_registry.checks import check_skill_settings


def ids(settings_obj=None):
    return sorted(p.id for p in check_skill_settings())


def test_clean_settings_pass(skill_env):
    assert ids() == []


def test_each_mistake_is_reported(skill_env, settings):
    settings.NETA_SKILLS_VALIDATION = "lenient"
    assert ids() == ["skills_registry.E001"]
    settings.NETA_SKILLS_VALIDATION = "pi"
    settings.NETA_SKILLS_DIRS = "/one/folder"
    assert ids() == ["skills_registry.E002"]
    settings.NETA_SKILLS_DIRS = [str(skill_env.tmp / "absent")]
    assert ids() == ["skills_registry.W001"]
    settings.NETA_SKILLS_DIRS = [str(skill_env.tmp)]  # holds the managed folder
    assert ids() == ["skills_registry.E003"]
    settings.NETA_SKILLS_DIRS = []
    settings.NETA_SKILL_IMPORT_MAX_BYTES = 0
    assert ids() == ["skills_registry.E004"]
