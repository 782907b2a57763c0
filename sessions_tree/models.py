"""Session meta, stored entries (mysql provider) and the per-session tree-event log."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


def id_collation(connection) -> str | None:
    """The collation that compares ids exactly on ``connection`` (None: the default does).

    Binary, and NO PAD: under a PAD SPACE collation (MariaDB's ``utf8mb4_bin``)
    ``"a1"`` and ``"a1 "`` are equal, so two distinct ids would collide in a
    unique index and a lookup would find the wrong row.
    """
    if connection.vendor != "mysql":
        return None  # SQLite compares bytes
    if connection.mysql_is_mariadb:
        return "utf8mb4_nopad_bin"  # MariaDB 10.2+
    return "utf8mb4_0900_bin" if connection.mysql_version >= (8, 0, 17) else "utf8mb4_bin"


class IdField(models.CharField):
    """An identifier column: compared exactly (binary, NO PAD collation) on MySQL/MariaDB.

    The collation is chosen per connection, so one migration serves SQLite (whose
    default comparison is already binary) and MySQL.
    """

    def db_parameters(self, connection):
        params = super().db_parameters(connection)
        collation = id_collation(connection)
        if collation:
            params["collation"] = collation
        return params


# Labelled with their values: the console says `file`, `archived`, `in_flight` as the API does.
class SessionStatus(models.TextChoices):
    ACTIVE = "active", "active"
    ARCHIVED = "archived", "archived"


class SessionProviderKind(models.TextChoices):
    FILE = "file", "file"
    MYSQL = "mysql", "mysql"


class AgentSession(models.Model):
    """One session's meta, whatever its provider. The leaf is persisted here.

    ``revision`` grows by one with every change to the tree or the leaf; each
    revision has exactly one ``SessionEvent``.
    """

    session_id = IdField(max_length=64, unique=True)
    provider = models.CharField(
        "session store", max_length=16, choices=SessionProviderKind.choices, default=SessionProviderKind.FILE,
        help_text=_("Where the entries are kept: one Pi JSONL file, or MySQL rows."),
    )  # fmt: skip
    header = models.TextField(help_text=_("The session header line exactly as stored (JSON)."))
    root_entry_id = IdField(max_length=64, null=True, blank=True)
    leaf_entry_id = IdField(max_length=64, null=True, blank=True)
    cwd = models.TextField(blank=True)
    session_file = models.TextField(blank=True, help_text=_("File provider: absolute path of the JSONL file."))
    parent_session_id = IdField(max_length=64, null=True, blank=True)
    agent = models.CharField(max_length=100, blank=True, db_index=True, verbose_name=_("agent"))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_sessions", verbose_name=_("user")
    )
    title = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.ACTIVE, verbose_name=_("status"))
    metadata = models.JSONField(default=dict, blank=True)
    revision = models.BigIntegerField(default=0)
    # The entry being streamed, if any (file provider: its JSON lives only here
    # until it is finalized and appended as one line).
    in_flight_entry_id = IdField(max_length=64, null=True, blank=True)
    in_flight_payload = models.TextField(blank=True)
    # mysql: the last row's seq; file: the file size after the last acknowledged write.
    last_seq = models.BigIntegerField(default=0)
    # Counters (kept in the same transaction as the change).
    entry_count = models.IntegerField(default=0)
    message_count = models.IntegerField(default=0)
    tip_count = models.IntegerField(default=0, help_text=_("Entries without children: one per branch."))
    compaction_count = models.IntegerField(default=0)
    branch_summary_count = models.IntegerField(default=0)
    label_count = models.IntegerField(default=0)
    diagnostics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        ordering = ["-updated_at"]
        verbose_name = _("session")
        verbose_name_plural = _("sessions")
        indexes = [models.Index(fields=["user", "-updated_at"]), models.Index(fields=["agent", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or self.session_id

    @property
    def branch_count(self) -> int:
        return self.tip_count


class EntryStatus(models.TextChoices):
    IN_FLIGHT = "in_flight", "in_flight"
    COMPLETED = "completed", "completed"
    ABORTED = "aborted", "aborted"
    FAILED = "failed", "failed"


class SessionEntry(models.Model):
    """One entry of a session kept by the ``mysql`` provider.

    ``payload`` is the entry's exact JSON text (a JSON column could reorder keys);
    the other columns are derived from it for queries. An entry id that a Pi file
    repeats keeps its id on the last line (Pi's index is last-wins); earlier lines
    get ``entry_id = "<id>~<seq>"`` and ``shadowed=True``.
    """

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="entries", verbose_name=_("session"))
    entry_id = IdField(max_length=80, verbose_name=_("entry id"))
    parent_entry_id = IdField(max_length=64, null=True, blank=True, verbose_name=_("parent entry id"))
    seq = models.BigIntegerField(verbose_name=_("seq"))
    type = models.CharField(max_length=64, verbose_name=_("type"))
    role = models.CharField(max_length=32, blank=True, verbose_name=_("role"))
    target_entry_id = IdField(max_length=64, null=True, blank=True)
    first_kept_entry_id = IdField(max_length=64, null=True, blank=True)
    timestamp = models.CharField(max_length=40, blank=True, verbose_name=_("timestamp"))
    status = models.CharField(max_length=16, choices=EntryStatus.choices, default=EntryStatus.COMPLETED, verbose_name=_("status"))
    shadowed = models.BooleanField(default=False)
    payload = models.TextField()

    class Meta:
        ordering = ["session", "seq"]
        verbose_name = _("session entry")
        verbose_name_plural = _("session entries")
        constraints = [
            models.UniqueConstraint(fields=["session", "entry_id"], name="uniq_session_entry_id"),
            models.UniqueConstraint(fields=["session", "seq"], name="uniq_session_seq"),
        ]
        indexes = [models.Index(fields=["session", "parent_entry_id"], name="entry_parent_idx")]

    def __str__(self) -> str:
        return f"{self.entry_id} ({self.type})"


class SessionEvent(models.Model):
    """The bounded per-session log of tree events, for gap filling (docs/realtime.md)."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="events", verbose_name=_("session"))
    revision = models.BigIntegerField(verbose_name=_("revision"))
    type = models.CharField(max_length=64, verbose_name=_("type"))
    payload = models.TextField()
    # Who did it (sessions_tree.acting): the user a service acted for — the owner, or staff
    # acting on someone else's session; null for the command line, the reaper, repairs.
    # Not part of the event's payload (the socket protocol does not change).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("actor")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        ordering = ["session", "revision"]
        constraints = [models.UniqueConstraint(fields=["session", "revision"], name="uniq_session_event_revision")]

    def __str__(self) -> str:
        return f"{self.type} r{self.revision}"
