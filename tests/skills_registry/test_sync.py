"""skills_sync: rows, idempotence, versions, removal, staff fields kept, the command."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import call_command

from skills_registry.models import SkillResource, SkillVersion
from skills_registry.services import (
    skills_set_disabled,
    skills_startup_sync,
    skills_sync,
)
from tests.support.skills import write_skill

pytestmark = pytest.mark.django_db


def rows():
    return {r.name + "@" + r.scope: r for r in SkillResource.objects.all()}


def test_first_sync_records_everything(skill_env, owner):
    write_skill(skill_env.project_skills, "lint", extra="version: 1.2\nlicense: MIT", files={"scripts/run.sh": "x"})
    write_skill(skill_env.workspace, "deploy")
    write_skill(skill_env.user_skills, "lint", description="user copy")
    write_skill(skill_env.user_skills, "Broken")
    report = skills_sync(actor=owner)
    assert sorted(report.added) == ["Broken", "deploy", "lint", "lint"]
    assert report.invalid == 1 and report.shadowed == 1
    r = rows()
    lint = r["lint@project"]
    assert lint.status == "active" and lint.version == "1.2" and lint.metadata == {"license": "MIT"}
    assert lint.source == "local" and lint.source_info["root_label"] == ".neta/skills"
    assert lint.source_info["path"] == "lint/SKILL.md"
    assert lint.entry_file == str(skill_env.project_skills / "lint" / "SKILL.md")
    assert [f["path"] for f in lint.files] == ["SKILL.md", "scripts/run.sh"] and lint.file_count == 2
    assert len(lint.fingerprint) == 64 and lint.revision == 1
    assert r["deploy@workspace"].source_info["root_label"] == "NETA_SKILLS_DIRS[0]"
    assert r["lint@user"].status == "shadowed"
    assert r["lint@user"].diagnostics[0]["code"] == "collision"
    broken = r["Broken@user"]
    assert broken.status == "invalid" and broken.error_codes == ["name-invalid-chars"]
    assert SkillVersion.objects.count() == 4


def test_sync_is_idempotent(skill_env, django_assert_max_num_queries):
    for i in range(4):
        write_skill(skill_env.project_skills, f"s{i}")
    write_skill(
        skill_env.project_skills,
        "s4",
        extra="metadata:\n  ratio: 1.5\n  tags: [a, b]\n  nested: {deep: [1, {x: null}]}\nauthor: Zoë ✓\nbig: 12345678901234567890",
    )
    write_skill(skill_env.user_skills, "s0")  # shadowed: its collision diagnostic must be stable too
    skills_sync()
    before = {r.pk: (r.updated_at, r.revision) for r in SkillResource.objects.all()}
    with django_assert_max_num_queries(4):
        report = skills_sync()
    assert (report.added, report.changed, report.removed, report.unchanged) == ([], [], [], 6)
    assert {r.pk: (r.updated_at, r.revision) for r in SkillResource.objects.all()} == before
    out = io.StringIO()
    call_command("skills_sync", stdout=out)
    assert out.getvalue().strip().splitlines()[-1] == "added=0 changed=0 removed=0 unchanged=6 invalid=0 shadowed=1"


def test_changed_fingerprint_is_a_new_version(skill_env):
    skill_md = write_skill(skill_env.project_skills, "evolve", files={"ref.md": "v1"})
    skills_sync()
    (skill_md.parent / "ref.md").write_text("v2")
    report = skills_sync()
    assert report.changed == ["evolve"] and report.new_versions == ["evolve r2"]
    row = SkillResource.objects.get(name="evolve")
    assert row.revision == 2
    assert list(row.versions.values_list("revision", flat=True)) == [2, 1]
    assert row.versions.get(revision=2).fingerprint == row.fingerprint
    assert row.versions.get(revision=1).fingerprint != row.fingerprint


def test_removed_then_back_keeps_staff_settings(skill_env, staff):
    skill_md = write_skill(skill_env.project_skills, "comes-and-goes")
    skills_sync()
    row = SkillResource.objects.get(name="comes-and-goes")
    skills_set_disabled(skills=[row], disabled=True, actor=staff)
    os.rename(skill_md.parent, skill_env.tmp / "parked")
    report = skills_sync()
    assert report.removed == ["comes-and-goes"]
    assert SkillResource.objects.get(pk=row.pk).status == "missing"
    assert skills_sync().removed == []  # removal is reported once
    os.rename(skill_env.tmp / "parked", skill_md.parent)
    report = skills_sync()
    assert report.added == ["comes-and-goes"]
    row.refresh_from_db()
    assert row.status == "active" and row.disabled is True and row.changed_by == staff
    assert row.revision == 1  # same content, same version


def test_collision_winner_change_is_recorded(skill_env):
    write_skill(skill_env.user_skills, "dup", description="user")
    skills_sync()
    assert rows()["dup@user"].status == "active"
    write_skill(skill_env.project_skills, "dup", description="project")
    report = skills_sync()
    assert report.added == ["dup"] and report.changed == ["dup"]
    assert rows()["dup@user"].status == "shadowed" and rows()["dup@project"].status == "active"


def test_mode_switch_changes_status(skill_env):
    write_skill(skill_env.project_skills, "Lenient")
    skills_sync()
    assert rows()["Lenient@project"].status == "invalid"
    skills_sync(mode="pi")
    row = rows()["Lenient@project"]
    assert row.status == "active" and row.diagnostics[0]["severity"] == "warning"


def test_startup_sync_reports_and_never_raises(skill_env, settings, caplog):
    write_skill(skill_env.project_skills, "ok")
    settings.NETA_SKILLS_DIRS = [str(skill_env.tmp / "does-not-exist")]
    report = skills_startup_sync()
    assert report is not None and report.added == ["ok"]
    assert any("root-missing" in rec.getMessage() for rec in caplog.records)
    settings.NETA_SKILLS_VALIDATION = "bogus"
    assert skills_startup_sync() is None
    assert any("failed" in rec.getMessage() for rec in caplog.records)


def test_command_prints_diagnostics(skill_env):
    write_skill(skill_env.project_skills, "no-desc", description=None)
    out = io.StringIO()
    call_command("skills_sync", stdout=out)
    text = out.getvalue()
    assert "added    no-desc" in text
    assert "error    description-missing" in text
    assert text.strip().endswith("invalid=1 shadowed=0")
