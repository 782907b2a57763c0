"""What sessions carry beside their tree: Chat Completions conversation nodes
(docs/api.md), share links and pins (docs/chat.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from sessions_tree.models import IdField  # exact comparison on MariaDB (binary, no pad)


class ConversationNode(models.Model):
    """One message of a session's conversation as an OpenAI Chat Completions client holds it,
    with a digest of the conversation up to it (``runtime/openai_api/conversation.py``).

    A node is a user message, or the last assistant entry of a turn (the turn's texts are one
    assistant message to the client). ``digest`` chains the digests of the nodes above it, so
    one indexed lookup finds, among the owner's sessions, the deepest node whose conversation
    is a prefix of the messages a client sends. Written when a Chat Completions turn ends;
    entries never change, so a node never does; it goes with its session (cascade)."""

    session = models.ForeignKey("sessions_tree.AgentSession", on_delete=models.CASCADE, related_name="+")
    owner_id = models.BigIntegerField(null=True, help_text=_("The session's user (sessions keep their owner)."))
    entry_id = IdField(max_length=64)
    depth = models.PositiveIntegerField(help_text=_("Messages from the root to this one, this one included."))
    digest = models.CharField(max_length=32, help_text=_("Hex of the first 16 bytes of the chained SHA-256."))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "entry_id"], name="conversation_node_entry")]
        indexes = [models.Index(fields=["owner_id", "digest"], name="conversation_node_lookup")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.entry_id} ({self.depth})"


class SessionShare(models.Model):
    """A read-only link to a session's active path as it was when shared (``leaf_entry_id``):
    ``/share/<token>/`` renders it without login until it is revoked (docs/chat.md, "Share")."""

    token = models.CharField(max_length=64, unique=True)
    session = models.ForeignKey("sessions_tree.AgentSession", on_delete=models.CASCADE, related_name="shares")
    leaf_entry_id = models.CharField(max_length=80)
    title = models.CharField(max_length=500, blank=True, verbose_name=_("title"))
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("created by"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    revoked_at = models.DateTimeField(null=True, blank=True, verbose_name=_("revoked at"))
    views = models.PositiveIntegerField(default=0, verbose_name=_("views"))

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share of {self.session_id} ({'revoked' if self.revoked_at else 'live'})"


class SessionPin(models.Model):
    """A session pinned to the top of its user's session list."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey("sessions_tree.AgentSession", on_delete=models.CASCADE, related_name="+")
    pinned_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "session"], name="session_pin_unique")]
