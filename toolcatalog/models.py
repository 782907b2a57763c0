"""Governance: one ``ToolConfig`` row per tool name, edited by staff in the admin."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from toolcatalog.manifest import WORKER_ROUTES


class ToolConfig(models.Model):
    """Staff settings for one tool. No row means the defaults (enabled, manifest route)."""

    ROUTE_CHOICES = [("", "manifest default")] + [(r, r) for r in WORKER_ROUTES]

    name = models.CharField(max_length=64, unique=True, help_text="Registered tool name, e.g. 'bash'.")
    enabled = models.BooleanField(default=True, help_text="Off: no agent gets this tool.")
    label_override = models.CharField(max_length=200, blank=True)
    description_override = models.TextField(blank=True, help_text="Replaces the description the model sees.")
    prompt_hint = models.TextField(blank=True, help_text="Default hint for the system prompt; agents may override.")
    allow_in_subagent = models.BooleanField(default=True)
    worker_routing = models.CharField(max_length=32, blank=True, choices=ROUTE_CHOICES)
    renderer_key = models.CharField(max_length=64, blank=True, help_text="Which UI renderer shows its calls.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "tool configuration"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from toolcatalog.protocol import UnknownTool, get_tool

        try:
            tool = get_tool(self.name)
        except UnknownTool:
            raise ValidationError({"name": f"no tool named {self.name!r} is registered"}) from None
        if self.worker_routing and not tool.manifest.route_allowed(self.worker_routing):
            raise ValidationError({"worker_routing": f"{self.name!r} cannot run inside a worker process"})
        from toolcatalog.renderers import renderer_keys  # reads the chat page's key list (a file) on first use

        if self.renderer_key and self.renderer_key not in renderer_keys():
            raise ValidationError(
                {"renderer_key": f"no chat renderer {self.renderer_key!r}; one of {', '.join(sorted(renderer_keys()))}, or empty (the tool's own name, else the generic card)"}
            )


class CatalogVersion(models.Model):
    """One row (pk 1): a number bumped in the same transaction as every change to a
    ``ToolConfig`` row or a skill row (``toolcatalog.catalog_version``). A process keeps
    what it read of the catalog with the number it read it at, so a run that learns the
    number with its claim (one column of a query it makes anyway) reads no catalog row
    until it changes, in any process."""

    version = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "catalog version"
