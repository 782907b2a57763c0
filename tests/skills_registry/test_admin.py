"""The staff console for skills: who gets in, list, detail, actions, sync and import pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from skills_registry.models import SkillResource
from skills_registry.services import skills_sync
from tests.support.skills import write_skill
from tests.support.skills import entry, good, raw_zip

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:skills_registry_skillresource_changelist"


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", password="pw-root")


@pytest.fixture
def plain_staff(django_user_model):
    """Staff, but with no permission on skills."""
    return django_user_model.objects.create_user("plain-staff", password="pw", is_staff=True)


@pytest.fixture
def skill_staff(django_user_model):
    """Staff who may view and change skills, not a superuser."""
    user = django_user_model.objects.create_user("skill-staff", password="pw", is_staff=True)
    for codename in ("view_skillresource", "change_skillresource"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


@pytest.fixture
def synced(skill_env):
    write_skill(
        skill_env.project_skills,
        "lint",
        description="Lint <things>.",
        body="# Lint body <script>alert(1)</script>",
        extra="version: 2.0",
        files={"scripts/run.sh": "echo"},
    )
    write_skill(skill_env.user_skills, "lint", description="shadowed copy")
    write_skill(skill_env.user_skills, "Bad_Name")
    skills_sync()
    return skill_env


def test_who_gets_in(client, synced, outsider, plain_staff):
    url = reverse(CHANGELIST)
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(outsider)
    assert client.get(url).status_code == 302  # not staff
    client.force_login(plain_staff)
    assert client.get(url).status_code == 403  # staff without skill permissions
    assert client.post(reverse("admin:skills_registry_skillresource_sync")).status_code == 403
    assert client.get(reverse("admin:skills_registry_skillresource_import")).status_code == 403


def test_list_shows_registry_columns(client, synced, admin_user):
    client.force_login(admin_user)
    page = client.get(reverse(CHANGELIST)).content.decode()
    lint = SkillResource.objects.get(name="lint", scope="project")
    for text in ("lint", "project", "local", "shadowed", "invalid", lint.short_fingerprint, "2.0", "allowed",
                 "name-invalid-chars (error)", "collision (warning)", "Sync now", "Import skill"):
        assert text in page, text
    assert "add/" not in page.split('id="content-main"')[1].split("</ul>")[0]  # no "Add" button


def test_detail_shows_skill_md_and_files_escaped(client, synced, admin_user):
    client.force_login(admin_user)
    lint = SkillResource.objects.get(name="lint", scope="project")
    page = client.get(reverse("admin:skills_registry_skillresource_change", args=[lint.pk])).content.decode()
    assert "# Lint body &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert "scripts/run.sh" in page and "SKILL.md" in page
    assert lint.fingerprint in page


def test_actions(client, synced, skill_staff):
    client.force_login(skill_staff)
    lint = SkillResource.objects.get(name="lint", scope="project")
    url = reverse(CHANGELIST)
    for action, field, value in (
        ("disable", "disabled", True),
        ("enable", "disabled", False),
        ("deny_in_subagents", "allow_in_subagent", False),
        ("allow_in_subagents", "allow_in_subagent", True),
        ("mark_privileged", "requires_privilege", True),
    ):
        response = client.post(url, {"action": action, "_selected_action": [lint.pk]})
        assert response.status_code == 302, action
        lint.refresh_from_db()
        assert getattr(lint, field) is value, action
        assert lint.changed_by == skill_staff
    page = client.get(url).content.decode()
    assert "never (privileged)" in page


def test_sync_button_and_action(client, synced, skill_staff):
    client.force_login(skill_staff)
    write_skill(synced.project_skills, "new-one")
    assert client.get(reverse("admin:skills_registry_skillresource_sync")).status_code == 405
    response = client.post(reverse("admin:skills_registry_skillresource_sync"), follow=True)
    assert "Skills synced: added=1" in response.content.decode()
    assert SkillResource.objects.filter(name="new-one").exists()
    any_pk = SkillResource.objects.first().pk
    response = client.post(reverse(CHANGELIST), {"action": "sync_now", "_selected_action": [any_pk]}, follow=True)
    assert "added=0 changed=0 removed=0" in response.content.decode()
    # The sync that added a skill is in the audit log with what it changed; the one that changed nothing is not.
    from audit.models import AuditEntry

    [row] = AuditEntry.objects.filter(action="skill.sync")
    assert row.actor == skill_staff and row.via == "console" and row.after == {"added": ["new-one"], "changed": [], "removed": []}


def test_import_page_zip_and_refusal(client, skill_env, skill_staff):
    client.force_login(skill_staff)
    url = reverse("admin:skills_registry_skillresource_import")
    assert client.get(url).status_code == 200
    upload = SimpleUploadedFile("good.zip", raw_zip(good()), content_type="application/zip")
    response = client.post(url, {"scope": "user", "archive": upload})
    assert response.status_code == 302
    row = SkillResource.objects.get(name="good")
    assert (row.scope, row.source, row.source_info["imported_by"], row.source_info["original"]) == (
        "user", "zip", "skill-staff", "good.zip"
    )
    evil = SimpleUploadedFile("evil.zip", raw_zip(good(entry("../evil.txt"))), content_type="application/zip")
    response = client.post(url, {"scope": "user", "archive": evil, "replace": "on"})
    assert response.status_code == 200 and "Import refused" in response.content.decode()
    assert "&#x27;..&#x27; segment" in response.content.decode()
    both = client.post(url, {"scope": "user", "folder": "/x", "archive": SimpleUploadedFile("a.zip", b"x")})
    assert "either a ZIP archive or a folder" in both.content.decode()


def test_folder_import_is_for_superusers(client, skill_env, skill_staff, admin_user):
    src = write_skill(skill_env.tmp / "src", "on-disk").parent
    url = reverse("admin:skills_registry_skillresource_import")
    client.force_login(skill_staff)
    assert client.post(url, {"scope": "workspace", "folder": str(src)}).status_code == 403
    assert not SkillResource.objects.filter(name="on-disk").exists()
    client.force_login(admin_user)
    assert client.post(url, {"scope": "workspace", "folder": str(src)}).status_code == 302
    assert SkillResource.objects.get(name="on-disk").source == "folder-import"


def test_skill_pages_are_views_and_their_switches_need_the_change_permission(client, synced, admin_user, django_user_model):
    """Saving a skill's page would write the row back behind the registry; the switches are actions."""
    skill = SkillResource.objects.get(name="lint", scope="project")
    page = reverse("admin:skills_registry_skillresource_change", args=[skill.pk])
    client.force_login(admin_user)
    assert client.get(page).status_code == 200
    assert client.post(page, {"disabled": "on", "_save": "Save"}).status_code == 403
    assert not SkillResource.objects.get(pk=skill.pk).disabled

    viewer = django_user_model.objects.create_user("skill-viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_skillresource"))
    client.force_login(viewer)
    assert 'value="disable"' not in client.get(reverse(CHANGELIST)).content.decode()
    client.post(reverse(CHANGELIST), {"action": "disable", "_selected_action": [skill.pk]})
    assert not SkillResource.objects.get(pk=skill.pk).disabled

    client.force_login(admin_user)
    client.post(reverse(CHANGELIST), {"action": "disable", "_selected_action": [skill.pk]})
    assert SkillResource.objects.get(pk=skill.pk).disabled
