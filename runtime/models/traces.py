"""What a run did, as it happened: each model call with its request by reference, each
tool call, and the texts those requests share (docs/runtime.md, "Traces")."""

from __future__ import annotations

from django.db import models

from runtime.models.runs import AgentRun


class Blob(models.Model):
    """Text stored once by its SHA-256 (a system prompt, a set of tool definitions): the model
    calls that sent it point at it instead of carrying a copy each."""

    digest = models.CharField(max_length=64, primary_key=True)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)


class ModelCall(models.Model):
    """One call of a model, as it happened (docs/runtime.md, "Traces"): which model, provider and
    endpoint answered, its timings, stop reason, usage, cost and error, and its exact request
    by reference — the entry its context ends at (the messages are that entry's path in the
    tree), the blobs of its system prompt and tools, and the request's other fields — enough
    to rebuild the body it sent byte for byte (``runtime.llm.bodies``). A subagent child's call
    names its child and the place in the child's context instead of an entry, and its body
    is not rebuilt (the child's messages lived in its process)."""

    run = models.ForeignKey(AgentRun, null=True, blank=True, on_delete=models.CASCADE, related_name="model_calls")
    # A subagent child's call: the child that made it (``run`` is the run that started the
    # batch), and where in the child's context it was made — the seq of the child's last
    # event before the call (its messages live in the child's process, not in the tree).
    subprocess_run = models.ForeignKey(
        "runtime.SubprocessRun", null=True, blank=True, on_delete=models.CASCADE, related_name="model_calls"
    )
    context_seq = models.PositiveIntegerField(null=True, blank=True)
    session_id = models.CharField(max_length=64, db_index=True)
    purpose = models.CharField(max_length=16, default="turn")  # turn (more later: compaction, titles)
    model = models.CharField(max_length=64)
    model_id = models.CharField(max_length=200, blank=True)  # the provider's name for it, as asked
    provider = models.CharField(max_length=64, blank=True)
    api = models.CharField(max_length=32, blank=True)
    endpoint = models.CharField(max_length=255, blank=True)
    context_leaf_id = models.CharField(max_length=64, blank=True)
    entry_id = models.CharField(max_length=64, blank=True)
    system_digest = models.CharField(max_length=64, blank=True)
    # A call whose messages are not a path of the tree (a summary's, a title's): their blob.
    messages_digest = models.CharField(max_length=64, blank=True)
    tools_digest = models.CharField(max_length=64, blank=True)
    # The model as it was called (its spec without the key: id, options, limits), so the request
    # rebuilds as sent after the model's row changed; blank on older records (today's row then).
    spec_digest = models.CharField(max_length=64, blank=True)
    settings = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField()
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=16, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    error = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["started_at"])]


class ToolCallRecord(models.Model):
    """One tool call of a run, as it happened: the tool, the size of its arguments, when it ran
    and how it ended (its span in the run's trace)."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="tool_calls")
    tool_call_id = models.CharField(max_length=128)
    tool = models.CharField(max_length=128)
    arguments_size = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    outcome = models.CharField(max_length=16)  # ok | error | refused | denied | skipped

    class Meta:
        indexes = [models.Index(fields=["started_at"])]
