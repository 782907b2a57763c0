"""Subagent children and their events (docs/subagents.md, "Records"), and the beats of
background duties (the console's health)."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from runtime.models.runs import AgentRun


class SubprocessStatus(models.TextChoices):
    """A subagent child's life (docs/subagents.md, "Records"). The last five are terminal."""

    QUEUED = "queued", "queued"
    STARTING = "starting", "starting"
    RUNNING = "running", "running"
    CANCELLING = "cancelling", "cancelling"
    COMPLETED = "completed", "completed"
    PARTIAL = "partial", "partial"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    TIMED_OUT = "timed_out", "timed_out"
    LOST = "lost", "lost"


ACTIVE_SUBPROCESS_STATUSES = (
    SubprocessStatus.QUEUED,
    SubprocessStatus.STARTING,
    SubprocessStatus.RUNNING,
    SubprocessStatus.CANCELLING,
)


class SubprocessRun(models.Model):
    """One subagent child: a task of a delegate call, run as a separate OS process.

    ``(parent_run, tool_call_id, task_index)`` is the idempotency key: a replayed tool
    call finds its rows instead of spawning again."""

    run_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, verbose_name=_("run id"))
    session_id = models.CharField(max_length=64, db_index=True, verbose_name=_("session id"))
    parent_entry_id = models.CharField(max_length=64, blank=True, help_text=_("The assistant entry holding the delegate call."))
    batch_id = models.CharField(max_length=64, db_index=True)
    batch_entry_id = models.CharField(max_length=64, blank=True, help_text=_("The subagent_batch entry of the call."))
    parent_run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="subprocess_runs")
    parent_subprocess = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children", help_text=_("Set for a grandchild.")
    )
    tool_call_id = models.CharField(max_length=200)
    task_index = models.PositiveIntegerField(verbose_name=_("task index"))
    mode = models.CharField(max_length=16, choices=[("single", "single"), ("parallel", "parallel"), ("chain", "chain")], verbose_name=_("mode"))
    depth = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=SubprocessStatus.choices, default=SubprocessStatus.QUEUED, db_index=True, verbose_name=_("status"))
    agent = models.CharField(max_length=64, verbose_name=_("agent"))
    task = models.TextField()
    backend = models.CharField(max_length=16, default="inline", verbose_name=_("backend"))
    pid = models.IntegerField(null=True, blank=True, verbose_name=_("pid"))
    worker_host = models.CharField(max_length=255, blank=True)
    worker_pid = models.IntegerField(null=True, blank=True, help_text=_("The supervising process (web process or Celery child)."))
    worker_started = models.BigIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.CharField(max_length=16, blank=True)
    error_code = models.CharField(max_length=32, blank=True, verbose_name=_("error code"))
    error = models.TextField(blank=True)
    final_text = models.TextField(blank=True)
    usage = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    limits = models.JSONField(default=dict, blank=True)
    envelope = models.JSONField(default=dict, blank=True, help_text=_("The task envelope (no secrets: key variable names only)."))
    denied_tools = models.JSONField(default=list, blank=True)
    stderr_tail = models.TextField(blank=True)
    noise = models.JSONField(default=dict, blank=True)
    event_count = models.PositiveIntegerField(default=0, verbose_name=_("event count"))
    cancel_requested = models.BooleanField(default=False)
    cancelled_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created_at", "task_index"]
        verbose_name = _("subagent run")
        verbose_name_plural = _("subagent runs")
        constraints = [
            models.UniqueConstraint(fields=["parent_run", "tool_call_id", "task_index"], name="subprocess_run_idempotency"),
        ]
        indexes = [
            models.Index(fields=["session_id", "status"]),
            models.Index(fields=["status", "heartbeat_at"]),
            models.Index(fields=["created_at"]),  # the console's subagent-runs list, newest first
        ]

    def __str__(self) -> str:
        return f"subagent {self.run_id} ({self.agent}, {self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_SUBPROCESS_STATUSES


class SubprocessEvent(models.Model):
    """One JSONL event of a child, as the host received it (or wrote it: a synthetic end)."""

    run = models.ForeignKey(SubprocessRun, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=32)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="subprocess_event_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"


class SubagentApprovalStatus(models.TextChoices):
    """A child's approval request (docs/subagents.md, "Approvals"). Only ``pending`` waits."""

    PENDING = "pending", "pending"
    ALLOWED = "allowed", "allowed"
    DENIED = "denied", "denied"
    EXPIRED = "expired", "expired"
    CANCELLED = "cancelled", "cancelled"


class SubagentApproval(models.Model):
    """A subagent child's tool call that waits for a person, surfaced in the parent session.

    ``(subprocess_run, tool_call_id)`` is unique: a child that asks again for the same call
    gets the same request (and, once decided, the same decision)."""

    subprocess_run = models.ForeignKey(SubprocessRun, on_delete=models.CASCADE, related_name="approvals", verbose_name=_("subagent run"))
    session_id = models.CharField(max_length=64, db_index=True, verbose_name=_("session id"))
    tool_call_id = models.CharField(max_length=200, verbose_name=_("tool call id"))
    tool = models.CharField(max_length=64, verbose_name=_("tool"))
    request = models.JSONField(default=dict, help_text=_("The exact call and what a person needs to judge it."))
    status = models.CharField(
        max_length=16, choices=SubagentApprovalStatus.choices, default=SubagentApprovalStatus.PENDING, db_index=True, verbose_name=_("status")
    )
    scope = models.CharField(max_length=16, default="once", verbose_name=_("scope"))
    prefix = models.CharField(max_length=500, blank=True, verbose_name=_("prefix"))
    note = models.TextField(blank=True, verbose_name=_("note"))
    decided_by = models.CharField(max_length=200, blank=True, verbose_name=_("decided by"))
    decided_at = models.DateTimeField(null=True, blank=True, verbose_name=_("decided at"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    recorded = models.BooleanField(default=False, help_text=_("Written into the parent session's tree."))

    class Meta:
        ordering = ["created_at", "pk"]
        verbose_name = _("subagent approval")
        verbose_name_plural = _("subagent approvals")
        constraints = [models.UniqueConstraint(fields=["subprocess_run", "tool_call_id"], name="subagent_approval_call")]
        indexes = [models.Index(fields=["session_id", "status"]), models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"approval {self.tool} of {self.subprocess_run_id} ({self.status})"


class ProcessBeat(models.Model):
    """The last pass of a background duty in one process (the reaper's rounds), for the console's health.

    One row per (duty, host, pid), updated in place; a Celery worker's reaper timer makes
    its row that worker's heartbeat. Rows of processes silent for a week are pruned."""

    duty = models.CharField(max_length=32)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    role = models.CharField(max_length=64, blank=True, help_text=_("What the process is: web, celery worker, beat, command."))
    node = models.CharField(max_length=255, blank=True, help_text=_("A Celery worker's node name (its -n), as the workers answer a broadcast."))
    at = models.DateTimeField()
    changed = models.PositiveIntegerField(default=0, help_text=_("Runs the last pass changed."))
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["duty", "host", "pid"], name="process_beat_unique")]
        indexes = [models.Index(fields=["duty", "at"])]
