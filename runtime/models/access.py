"""Who may reach what from outside: API tokens (docs/api.md) and each user's own settings
(docs/chat.md, "Settings")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class TokenScope(models.TextChoices):
    READ_ONLY = "read", "read-only"
    READ_WRITE = "read_write", "read-write"


class ApiToken(models.Model):
    """An integration token for the REST API and the websocket gateway.

    Only a SHA-256 digest of the token is stored (tokens are 256-bit random
    strings, so a fast digest is enough); the token itself is shown once, when
    it is created. ``prefix`` (the first characters) identifies it in lists.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens", verbose_name=_("user"))
    name = models.CharField(max_length=100, blank=True, help_text=_("What the token is for."), verbose_name=_("name"))
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    scope = models.CharField(max_length=16, choices=TokenScope.choices, default=TokenScope.READ_WRITE, verbose_name=_("scope"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    expires_at = models.DateTimeField(null=True, blank=True, help_text=_("Empty: never expires."), verbose_name=_("expires at"))
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last used at"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def read_only(self) -> bool:
        return self.scope == TokenScope.READ_ONLY

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class UserSettings(models.Model):
    """What a user set for themselves on the chat page (docs/chat.md, "Settings")."""

    MAX_INSTRUCTIONS = 4000

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="neta_settings")
    custom_instructions = models.TextField(
        blank=True, max_length=MAX_INSTRUCTIONS,
        help_text=_("Added to the system prompt of every run in this user's sessions (after the agent's own prompt)."),
    )  # fmt: skip
    # The language of the pages and messages for this user ("": the browser's Accept-Language);
    # it is kept in the language cookie at each sign-in and each change (runtime/pages/language.py).
    language = models.CharField(max_length=16, blank=True, default="", choices=settings.LANGUAGES)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = _("user settings")

    def __str__(self) -> str:
        return f"settings of user {self.user_id}"
