"""The audit log: one row per staff write, kept for the record (docs/console.md, "Audit log")."""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils.translation import gettext_lazy as _


class Via(models.TextChoices):
    CONSOLE = "console", "console"  # a page under /admin/
    API = "api", "api"  # the REST API
    SOCKET = "socket", "socket"  # the session websocket
    CLI = "cli", "cli"  # a management command, a task, a test: no request


class AuditEntry(models.Model):
    """Who changed what, when, through which door, and the values before and after.

    ``actor`` goes null if the user is deleted; ``actor_name`` keeps who it was. ``target_type``
    is the changed row's ``app_label.model_name`` and ``target_id`` its public id (a session's
    id, a run's UUID, a skill's or an agent's primary key…). Rows are written by
    ``audit.services.record`` in the change's transaction and never edited or deleted.
    """

    at = models.DateTimeField("when", auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True, verbose_name=_("actor name"))
    action = models.CharField(max_length=64, db_index=True, verbose_name=_("action"))
    target_type = models.CharField(max_length=64, verbose_name=_("target type"))
    target_id = models.CharField(max_length=128)
    target_repr = models.CharField("target", max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    via = models.CharField(max_length=16, choices=Via.choices, verbose_name=_("via"))
    request_id = models.CharField(max_length=64, blank=True, db_index=True, verbose_name=_("request id"))

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit log")
        indexes = [models.Index(fields=["target_type", "target_id"]), models.Index(fields=["actor", "at"])]

    def __str__(self) -> str:
        return f"{self.action} {self.target_repr or self.target_id} by {self.actor_name or 'nobody'}"
