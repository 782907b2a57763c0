"""Runs: one prompt on one session and everything the agent did for it, and the prompts
sent while it ran (docs/runtime.md)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from runtime.models.registry import Agent


class RunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    # Parked on an ``ask_user`` question: no thread, no worker; the answer (or its
    # expiry) makes it ``queued`` again and the backend resumes it (runs/questions.py).
    WAITING = "waiting", "waiting"
    COMPLETED = "completed", "completed"
    ABORTED = "aborted", "aborted"
    FAILED = "failed", "failed"
    LOST = "lost", "lost"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class AgentRun(models.Model):
    """One agent run on one session: a prompt and everything the agent did for it."""

    run_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    session_id = models.CharField(max_length=64, db_index=True)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs", verbose_name=_("agent"))
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_runs", verbose_name=_("user"))
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True, verbose_name=_("status"))
    prompt = models.TextField(blank=True)
    images = models.JSONField(default=list, blank=True)
    from_entry_id = models.CharField(max_length=64, blank=True)
    model_name = models.CharField(max_length=64, blank=True, help_text=_("Model override for this run (default: the agent's)."))
    # What happened, as it happened (never read from today's configuration): the model that
    # answered the run's last call (a fallback's name when one took over), and when the
    # first token of the run's first reply arrived.
    answered_model = models.CharField(max_length=64, blank=True, help_text=_("The model that answered the run's last call."))
    first_token_at = models.DateTimeField(null=True, blank=True)
    # Added to the agent's system prompt for this run's model calls (an OpenAI client's
    # ``instructions`` or system messages: docs/api.md, "OpenAI-compatible endpoints").
    instructions = models.TextField(blank=True)
    # Sampling parameters for this run's model calls, passed to the providers that take them
    # (``runtime/llm/sampling.py``): temperature, top_p, stop, seed, presence_penalty,
    # frequency_penalty, max_tokens.
    sampling = models.JSONField(default=dict, blank=True)
    backend = models.CharField(max_length=16, default="inline")
    worker = models.CharField(max_length=200, blank=True)
    # The process that owns the run: the submitting one while it is queued (inline
    # backend), the executing one once claimed. host + pid + the process's start time
    # (Linux: /proc/<pid>/stat) tell a dead process from a live one, or from a new
    # process that was given the same pid (runtime/runs/reaper.py).
    host = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    process_started = models.BigIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    submissions = models.PositiveIntegerField(default=0)
    # The user entry holding the run's own prompt, once it is in the tree: a lost run
    # without one never delivered its prompt, so the reaper carries it into a new run.
    prompt_entry_id = models.CharField(max_length=64, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Who asked the run to stop (the run's own user, or staff); the error text says which.
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="cancelled_runs"
    )
    in_flight_entry_id = models.CharField(max_length=64, blank=True)
    # The ``ask_user`` question the run waits on (``waiting``), or last waited on:
    # toolCallId, question, options, allowFreeText, multiSelect, askedAt, expiresAt, and
    # once settled ``outcome`` (answered / expired) with ``answer`` and ``answeredBy``.
    question = models.JSONField(default=dict, blank=True)
    waiting_since = models.DateTimeField(null=True, blank=True)
    rounds = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    error = models.TextField(blank=True)
    # What the run did on its own that its user should know (runtime/runs/notes.py): a model
    # failover ("answered by X after Y failed: reason"), a thinking level clamped to the
    # model's. Each ``{kind, text, at, …}``; also sent to the page as ``run_note`` events.
    notes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        indexes = [
            models.Index(fields=["session_id", "status"]),
            models.Index(fields=["status", "heartbeat_at"]),
            models.Index(fields=["created_at"]),  # the console's runs list and the overview's last 24 h / 7 days
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES


class RunInputKind(models.TextChoices):
    FOLLOW_UP = "follow_up"
    STEER = "steer"


class RunInput(models.Model):
    """A prompt sent while a run was active: delivered as a follow-up or to steer it."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="inputs")
    kind = models.CharField(max_length=16, choices=RunInputKind.choices, default=RunInputKind.FOLLOW_UP)
    text = models.TextField()
    images = models.JSONField(default=list, blank=True)
    consumed = models.BooleanField(default=False)
    # Who sent it (may be staff on another user's run): the entry it becomes names them.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
