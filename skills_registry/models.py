"""Registry rows: one ``SkillResource`` per skill file discovery has seen.

A row is keyed by its entry file (``path_key`` = SHA-256 of the absolute
path), so two skills with the same name in different scopes are two rows: the
one that wins by precedence is ``active``, the other ``shadowed``. Rows are
written only by ``services.skills_sync`` (discovery facts) and by the staff
services (``disabled``, ``allow_in_subagent``, ``requires_privilege``); a sync
never resets the staff fields. A skill that disappears from disk becomes
``missing`` (its staff settings are kept for when it comes back).

Every new fingerprint is a new ``SkillVersion`` (``revision`` counts them).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


def path_key_for(entry_file: str) -> str:
    return hashlib.sha256(entry_file.encode("utf-8", "surrogateescape")).hexdigest()


class SkillResource(models.Model):
    class Scope(models.TextChoices):
        PROJECT = "project", "project"
        WORKSPACE = "workspace", "workspace"
        USER = "user", "user"

    class Source(models.TextChoices):
        LOCAL = "local", "local"
        ZIP = "zip", "zip"
        FOLDER_IMPORT = "folder-import", "folder import"

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        INVALID = "invalid", "invalid"
        SHADOWED = "shadowed", "shadowed"
        MISSING = "missing", "missing"

    path_key = models.CharField(max_length=64, unique=True, editable=False)
    name = models.CharField(max_length=255, db_index=True, verbose_name=_("name"))
    description = models.TextField(blank=True, default="")
    scope = models.CharField(max_length=16, choices=Scope.choices, verbose_name=_("scope"))
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.LOCAL, verbose_name=_("source"))
    source_info = models.JSONField(default=dict, blank=True)
    version = models.CharField(max_length=100, blank=True, default="", verbose_name=_("version"))
    fingerprint = models.CharField(max_length=64)
    revision = models.PositiveIntegerField(default=1, verbose_name=_("revision"))
    entry_file = models.TextField()
    base_dir = models.TextField()
    is_folder = models.BooleanField(default=True)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True, verbose_name=_("status"))
    diagnostics = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list, blank=True)
    file_count = models.PositiveIntegerField(default=0)
    total_bytes = models.PositiveBigIntegerField(default=0)
    disable_model_invocation = models.BooleanField(default=False)
    discovery_order = models.PositiveIntegerField(default=0)

    # Staff governance (never changed by a sync).
    disabled = models.BooleanField(default=False, verbose_name=_("disabled"))
    allow_in_subagent = models.BooleanField(default=True, verbose_name=_("allow in subagent"))
    requires_privilege = models.BooleanField(default=False, verbose_name=_("requires privilege"))
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("discovery_order", "id")
        verbose_name = _("skill")
        verbose_name_plural = _("skills")
        indexes = [models.Index(fields=["status", "discovery_order"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, {self.status})"

    @property
    def usable(self) -> bool:
        """Discovered, valid, winning its name, and not disabled by staff."""
        return self.status == self.Status.ACTIVE and not self.disabled

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:12]

    @property
    def error_codes(self) -> list[str]:
        return [d.get("code", "?") for d in self.diagnostics if d.get("severity") == "error"]


class SkillVersion(models.Model):
    """A fingerprint a skill has had, recorded when a sync first saw it."""

    skill = models.ForeignKey(SkillResource, on_delete=models.CASCADE, related_name="versions")
    revision = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=64)
    version = models.CharField(max_length=100, blank=True, default="")
    description = models.TextField(blank=True, default="")
    files = models.JSONField(default=list, blank=True)
    # The entry file's text as this version had it (up to the entry size limit), so the
    # console can diff SKILL.md between versions; empty for versions recorded before it was kept.
    skill_md = models.TextField(blank=True, default="")
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("skill", "-revision")
        constraints = [models.UniqueConstraint(fields=["skill", "revision"], name="skill_version_unique_revision")]

    def __str__(self) -> str:
        return f"{self.skill.name} r{self.revision} {self.fingerprint[:12]}"
