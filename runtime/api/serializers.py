"""Input and output serializers. Inputs validate shape only; services validate meaning.

The websocket gateway validates its command frames with the same input
serializers, so a bad ``prompt`` is refused the same way on both paths.
JSON keys are camelCase, like snapshots and tree events.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.relations import PKOnlyObject

from runtime.models import THINKING_LEVELS, Agent, AgentRun, ModelConfig
from runtime.runs.documents import MAX_DOCUMENTS
from runtime.runs.prompts import IMAGE_TYPES, MAX_IMAGES, MAX_PROMPT_CHARS
from runtime.sessions.services import MAX_LABEL, MAX_TITLE
from sessions_tree.models import AgentSession, SessionStatus
from sessions_tree.providers import SESSION_PROVIDER_KINDS
from skills_registry.models import SkillResource
from toolcatalog.visible import is_blank

ENTRY_ID_MAX = 80


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of converting them."""

    default_error_messages = {"not_a_string": "must be a string"}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


def entry_id_field(**kwargs) -> serializers.CharField:
    return StrictCharField(max_length=ENTRY_ID_MAX, trim_whitespace=False, **kwargs)


# --------------------------------------------------------------------------- inputs


class SessionCreateInput(serializers.Serializer):
    agent = StrictCharField(required=False, max_length=64, help_text="Agent name (default: the default agent).")
    title = StrictCharField(required=False, max_length=MAX_TITLE)


class SessionUpdateInput(serializers.Serializer):
    title = StrictCharField(required=False, max_length=MAX_TITLE, help_text="Rename (a session_info entry, as Pi's /name).")
    status = serializers.ChoiceField(required=False, choices=SessionStatus.values, help_text="archived / active")

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("give title and/or status")
        return attrs


class SessionListQuery(serializers.Serializer):
    user = StrictCharField(required=False, max_length=150, help_text="Staff only: sessions of this username.")
    agent = StrictCharField(required=False, max_length=64)
    status = serializers.ChoiceField(required=False, choices=SessionStatus.values)


class ImageInput(serializers.Serializer):
    data = StrictCharField(help_text="base64", trim_whitespace=False)
    mimeType = serializers.ChoiceField(choices=IMAGE_TYPES)


class DocumentInput(serializers.Serializer):
    name = StrictCharField(max_length=255, help_text="The file's name (shown, and given to the model).")
    data = StrictCharField(help_text="The file's bytes, base64 (at most 10 MB)", trim_whitespace=False)
    mimeType = StrictCharField(required=False, allow_null=True, max_length=100, help_text="application/pdf, text/markdown, text/plain … (else from the name)")


class PromptInput(serializers.Serializer):
    text = StrictCharField(max_length=MAX_PROMPT_CHARS, trim_whitespace=False)
    fromEntryId = entry_id_field(required=False, allow_null=True, help_text="Continue from this history node (Pi's /tree rule).")
    mode = serializers.ChoiceField(required=False, choices=["follow_up", "steer"], default="follow_up")
    images = ImageInput(many=True, required=False, max_length=MAX_IMAGES)
    documents = DocumentInput(
        many=True, required=False, max_length=MAX_DOCUMENTS,
        help_text="PDF, text, markdown or code files: their text joins the user message (a text block with a document wrapper each). REST only.",
    )  # fmt: skip
    model = StrictCharField(required=False, allow_null=True, max_length=64, help_text="Model name for this run only.")
    thinkingLevel = serializers.ChoiceField(
        required=False, allow_null=True, choices=list(THINKING_LEVELS),
        help_text="Written to the path before the prompt (a thinking_level_change entry) when it differs; the model must support thinking for any level but off.",
    )  # fmt: skip

    def validate_text(self, value):
        if is_blank(value):
            raise serializers.ValidationError("must not be blank")
        return value


class RegenerateInput(serializers.Serializer):
    entryId = entry_id_field(help_text="The user message to answer again (the new answer is a sibling of its answers).")
    model = StrictCharField(required=False, allow_null=True, max_length=64, help_text="Model name for this run only.")


class SessionSearchQuery(serializers.Serializer):
    q = StrictCharField(min_length=1, max_length=200, help_text="Text to find in titles and in user and assistant messages (case-insensitive).")
    agent = StrictCharField(required=False, max_length=64)
    status = serializers.ChoiceField(required=False, choices=SessionStatus.values)

    def validate_q(self, value):
        if is_blank(value):
            raise serializers.ValidationError("must not be blank")
        return value


class SwitchLeafInput(serializers.Serializer):
    entryId = entry_id_field(allow_null=True, help_text="The entry to continue from; null: before the first entry.")
    summarize = serializers.BooleanField(required=False, default=False, help_text="Summarize the abandoned branch.")
    instructions = StrictCharField(required=False, allow_null=True, max_length=10_000)


class LabelInput(serializers.Serializer):
    entryId = entry_id_field()
    label = StrictCharField(allow_null=True, allow_blank=True, max_length=MAX_LABEL, help_text="null or empty: clear.")


class CompactInput(serializers.Serializer):
    instructions = StrictCharField(required=False, allow_null=True, max_length=10_000)


class ForkInput(serializers.Serializer):
    entryId = entry_id_field(help_text="The new session holds the root→entry path.")


class ContinueInput(serializers.Serializer):
    entryId = entry_id_field(help_text="An answer cut at the output limit (stopReason length): the model goes on from it.")


class FeedbackInput(serializers.Serializer):
    entryId = entry_id_field(help_text="The answer (an assistant message) the feedback is about.")
    rating = serializers.ChoiceField(choices=["up", "down"], allow_null=True, help_text="up, down, or null to take it back.")
    note = StrictCharField(required=False, allow_blank=True, max_length=1000, default="", trim_whitespace=False)


class SettingsInput(serializers.Serializer):
    customInstructions = StrictCharField(
        allow_blank=True, max_length=4000, trim_whitespace=False,
        help_text="Added to the system prompt of every run in your sessions, after the agent's own prompt.",
    )  # fmt: skip


class ExportQuery(serializers.Serializer):
    # Not `format`: DRF reads that one for its own content negotiation.
    locals()["as"] = serializers.ChoiceField(required=False, choices=["jsonl", "markdown"], default="jsonl", help_text="jsonl (Pi's file) or markdown (the active path)")


class ImportInput(serializers.Serializer):
    file = serializers.FileField(help_text="A Pi session file (JSONL).")
    agent = StrictCharField(required=False, max_length=64)
    provider = serializers.ChoiceField(required=False, choices=SESSION_PROVIDER_KINDS, help_text="The session store to import into (default: the agent's).")


class RunListQuery(serializers.Serializer):
    session = StrictCharField(required=False, max_length=64)
    status = serializers.ChoiceField(required=False, choices=["queued", "running", "waiting", "completed", "aborted", "failed", "lost"])


# --------------------------------------------------------------------------- outputs


class SessionOut(serializers.ModelSerializer):
    sessionId = serializers.CharField(source="session_id")
    leafEntryId = serializers.CharField(source="leaf_entry_id", allow_null=True)
    rootEntryId = serializers.CharField(source="root_entry_id", allow_null=True)
    parentSessionId = serializers.CharField(source="parent_session_id", allow_null=True)
    inFlightEntryId = serializers.CharField(source="in_flight_entry_id", allow_null=True)
    owner = serializers.CharField(source="user.get_username", allow_null=True, default=None)
    entryCount = serializers.IntegerField(source="entry_count")
    messageCount = serializers.IntegerField(source="message_count")
    branchCount = serializers.IntegerField(source="tip_count")
    compactionCount = serializers.IntegerField(source="compaction_count")
    branchSummaryCount = serializers.IntegerField(source="branch_summary_count")
    labelCount = serializers.IntegerField(source="label_count")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = AgentSession
        fields = [
            "sessionId", "title", "agent", "provider", "status", "revision", "cwd", "owner",
            "leafEntryId", "rootEntryId", "parentSessionId", "inFlightEntryId",
            "entryCount", "messageCount", "branchCount", "compactionCount", "branchSummaryCount", "labelCount",
            "createdAt", "updatedAt",
        ]  # fmt: skip
        read_only_fields = fields
        extra_kwargs = {"provider": {"help_text": "The session store: file (one Pi JSONL file) or mysql."}}


class ImportLineOut(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True, help_text="1-based line number in the uploaded file.")
    kind = serializers.CharField(required=False, help_text="Skipped: malformed, torn_tail, not_an_object, extra_header, not_an_entry.")
    kinds = serializers.ListField(child=serializers.CharField(), required=False, help_text="Repaired: lone_surrogate, non_finite_number.")
    message = serializers.CharField(required=False)


class IdChangedOut(serializers.Serializer):
    locals()["from"] = serializers.CharField()  # "from" is a keyword
    to = serializers.CharField()


class LeafMovedOut(serializers.Serializer):
    to = serializers.CharField(allow_null=True, help_text="The leaf the session has (null: it starts a new root).")
    why = serializers.CharField()

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.CharField(allow_null=True, help_text="The file's last entry.")
        return fields


class ImportReportOut(serializers.Serializer):
    source = serializers.CharField()
    fileVersion = serializers.JSONField(allow_null=True)
    migrated = serializers.BooleanField()
    skippedLines = ImportLineOut(many=True, help_text="Lines left out (first 100), as Pi leaves them out.")
    skippedLineCount = serializers.IntegerField()
    skippedEntries = serializers.IntegerField()
    repairedLines = ImportLineOut(many=True, help_text="Lines stored re-serialized (first 100): a lone surrogate became U+FFFD, a non-finite number null.")
    repairedLineCount = serializers.IntegerField()
    repairedHeader = serializers.ListField(child=serializers.CharField(), required=False)
    cycles = serializers.ListField(child=serializers.ListField(child=serializers.CharField()), required=False, help_text="Parent cycles (entry ids, child first), kept as they are.")
    idChanged = IdChangedOut(required=False, help_text="The header id was taken: the session was stored under a fresh id.")
    leafMoved = LeafMovedOut(required=False, help_text="The last entry's path runs into a parent cycle: the leaf is the last entry whose path is whole.")


class ImportOut(SessionOut):
    locals()["import"] = ImportReportOut(source="diagnostics.import", help_text="What the import skipped, repaired or changed.")

    class Meta(SessionOut.Meta):
        fields = [*SessionOut.Meta.fields, "import"]
        read_only_fields = fields


class BuiltOnce:
    """An output serializer whose fields are built once per class, not per instance.

    DRF builds (deep-copies, and for a ModelSerializer maps from the model) every field of
    every serializer it instantiates: for a run that is most of a prompt request's
    response. Fields that read an attribute and format it (no ``SerializerMethodField``,
    nothing from the context) do the same for every instance, so a class-wide copy of them
    writes the representation, by DRF's own rules (``Serializer.to_representation``).
    The schema and everything else still see the declared fields."""

    _built_once: list | None = None

    def to_representation(self, instance):
        fields = type(self)._built_once
        if fields is None:
            template = type(self)()
            fields = [f for f in template.fields.values() if not f.write_only]
            if any(isinstance(f, serializers.SerializerMethodField) for f in fields):
                raise TypeError(f"{type(self).__name__}: a method field needs its own serializer (it reads self)")
            type(self)._built_once = fields
        out = {}
        for field in fields:
            try:
                attribute = field.get_attribute(instance)
            except serializers.SkipField:
                continue
            check = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            out[field.field_name] = None if check is None else field.to_representation(attribute)
        return out


class RunOut(BuiltOnce, serializers.ModelSerializer):
    runId = serializers.UUIDField(source="run_id")
    sessionId = serializers.CharField(source="session_id")
    agent = serializers.CharField(source="agent.name")
    fromEntryId = serializers.CharField(source="from_entry_id")
    modelName = serializers.CharField(source="model_name")
    cancelRequested = serializers.BooleanField(source="cancel_requested")
    inFlightEntryId = serializers.CharField(source="in_flight_entry_id")
    inputTokens = serializers.IntegerField(source="input_tokens")
    outputTokens = serializers.IntegerField(source="output_tokens")
    cacheReadTokens = serializers.IntegerField(source="cache_read_tokens")
    cacheWriteTokens = serializers.IntegerField(source="cache_write_tokens")
    cost = serializers.DecimalField(max_digits=14, decimal_places=6, coerce_to_string=False)
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    question = serializers.JSONField(read_only=True, help_text="The ask_user question the run waits on (status waiting) or last waited on; {} when none.")
    notes = serializers.JSONField(
        read_only=True,
        help_text="What the run did on its own: [{kind: failover|thinking, text, at, …}] (e.g. \"answered by X after Y failed: reason\").",
    )
    instructions = serializers.CharField(read_only=True, help_text="Added to the agent's system prompt for this run (an OpenAI client's instructions or system messages).")
    sampling = serializers.JSONField(read_only=True, help_text="An OpenAI client's sampling parameters for this run's model calls ({} when none).")
    answeredModel = serializers.CharField(source="answered_model", read_only=True, help_text="The model that answered the run's last call (a fallback's name when one took over); \"\" before the first reply.")
    firstTokenAt = serializers.DateTimeField(source="first_token_at", allow_null=True, read_only=True, help_text="When the first token of the run's first reply arrived.")

    class Meta:
        model = AgentRun
        fields = [
            "runId", "sessionId", "agent", "status", "prompt", "fromEntryId", "modelName", "backend",
            "cancelRequested", "inFlightEntryId", "rounds", "inputTokens", "outputTokens",
            "cacheReadTokens", "cacheWriteTokens", "cost", "error", "createdAt", "startedAt", "finishedAt", "question", "notes",
            "instructions", "sampling", "answeredModel", "firstTokenAt",
        ]  # fmt: skip
        read_only_fields = fields


class ModelOut(serializers.ModelSerializer):
    displayName = serializers.CharField(source="display_name")
    providerKind = serializers.CharField(source="provider_kind", help_text="The LLM provider: whose wire protocol calls this model.")
    modelId = serializers.CharField(source="model_id")
    contextWindow = serializers.IntegerField(source="context_window")
    maxOutputTokens = serializers.IntegerField(source="max_output_tokens")
    capabilities = serializers.SerializerMethodField()
    prices = serializers.SerializerMethodField()
    usable = serializers.BooleanField(read_only=True)

    class Meta:
        model = ModelConfig
        fields = ["name", "displayName", "providerKind", "modelId", "contextWindow", "maxOutputTokens", "capabilities", "prices", "enabled", "usable"]
        read_only_fields = fields

    @extend_schema_field({"type": "object", "properties": {k: {"type": "boolean"} for k in ("tools", "thinking", "images")}})
    def get_capabilities(self, obj) -> dict:
        return {"tools": obj.supports_tools, "thinking": obj.supports_thinking, "images": obj.supports_images}

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "number"}})
    def get_prices(self, obj) -> dict:
        return obj.prices


class AgentOut(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name")
    sessionProvider = serializers.CharField(source="session_provider", help_text="The session store of the agent's new sessions (file or mysql).")
    thinkingLevel = serializers.CharField(source="thinking_level")
    maxToolRounds = serializers.IntegerField(source="max_tool_rounds")
    restoreLastSession = serializers.BooleanField(source="restore_last_session")
    summarizeOnSwitch = serializers.CharField(source="summarize_on_switch")
    compactionEnabled = serializers.BooleanField(source="compaction_enabled")
    fallbackModels = serializers.ListField(
        source="fallback_models", child=serializers.CharField(),
        help_text="Model names tried in this order when a call fails before any output (docs/llm.md, \"Failover\").",
    )  # fmt: skip

    class Meta:
        model = Agent
        fields = [
            "name", "description", "model", "fallbackModels", "sessionProvider", "thinkingLevel", "maxToolRounds",
            "restoreLastSession", "summarizeOnSwitch", "compactionEnabled", "enabled",
        ]  # fmt: skip
        read_only_fields = fields


class AgentDetailOut(AgentOut):
    systemPrompt = serializers.CharField(source="system_prompt")
    toolPolicy = serializers.JSONField(source="tool_policy")
    skillPolicy = serializers.JSONField(source="skill_policy")
    subagentPolicy = serializers.JSONField(source="subagent_policy")

    class Meta(AgentOut.Meta):
        fields = [*AgentOut.Meta.fields, "systemPrompt", "toolPolicy", "skillPolicy", "subagentPolicy"]
        read_only_fields = fields


class SkillOut(serializers.ModelSerializer):
    fileCount = serializers.IntegerField(source="file_count")
    totalBytes = serializers.IntegerField(source="total_bytes")
    usable = serializers.BooleanField(read_only=True)
    disableModelInvocation = serializers.BooleanField(source="disable_model_invocation")
    allowInSubagent = serializers.BooleanField(source="allow_in_subagent")
    sourceInfo = serializers.JSONField(
        source="source_info", help_text="Where the skill was found: root, root_label, path (and an import's record)."
    )
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = SkillResource
        fields = [
            "id", "name", "description", "scope", "source", "sourceInfo", "status", "version", "fingerprint", "revision",
            "disabled", "usable", "disableModelInvocation", "allowInSubagent", "fileCount", "totalBytes", "updatedAt",
        ]  # fmt: skip
        read_only_fields = fields


class ToolDecisionOut(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    description = serializers.CharField()
    kind = serializers.CharField()
    effective = serializers.BooleanField()
    route = serializers.CharField()
    routeSource = serializers.CharField()
    source = serializers.CharField()
    reason = serializers.CharField()
    promptHint = serializers.CharField()
    renderer = serializers.CharField()
    manifest = serializers.DictField()


class ChildProjectionOut(serializers.Serializer):
    agent = serializers.CharField()
    depth = serializers.IntegerField(required=False)
    tools = serializers.ListField(child=serializers.DictField(), required=False, help_text="granted: name, route")
    denied = serializers.ListField(child=serializers.DictField(), required=False, help_text="taken away: name, reason")
    skills = serializers.ListField(child=serializers.CharField(), required=False)
    error = serializers.CharField(required=False)


class ToolProjectionOut(serializers.Serializer):
    agent = serializers.CharField()
    forSubagent = serializers.BooleanField()
    tools = ToolDecisionOut(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    children = ChildProjectionOut(many=True, required=False, help_text="for=subagent: each child agent's projection under this agent's policy")


@extend_schema_field(OpenApiTypes.OBJECT)
class EntryField(serializers.DictField):
    """A session entry exactly as stored (Pi's JSON, unknown fields included)."""


class SnapshotOut(serializers.Serializer):
    session = serializers.DictField()
    revision = serializers.IntegerField()
    leafId = serializers.CharField(allow_null=True)
    entries = serializers.ListField(child=EntryField())
    activePath = serializers.ListField(child=serializers.CharField())
    childrenByParentId = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
    labelsByEntryId = serializers.DictField(child=serializers.CharField())
    inFlight = EntryField(allow_null=True)
    runtimeContext = serializers.DictField()
    pathError = serializers.DictField(
        allow_null=True, help_text="Set when the parent links above the leaf loop: `kind` (cycle), `ids`, `message`."
    )
    page = serializers.DictField()


class EntryPageOut(serializers.Serializer):
    results = serializers.ListField(child=EntryField())
    firstSeq = serializers.IntegerField(help_text="Sequence of the first entry in results (1-based).")
    nextCursor = serializers.IntegerField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class EventPageOut(serializers.Serializer):
    results = serializers.ListField(child=serializers.DictField(), help_text="Tree events in revision order.")
    revision = serializers.IntegerField(help_text="The session's current revision.")
    nextCursor = serializers.IntegerField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class PromptOut(serializers.Serializer):
    run = RunOut()
    queuedAs = serializers.CharField(allow_null=True, help_text="null: a new run; follow_up/steer: delivered to the active run.")
    editorText = serializers.CharField(allow_null=True)


class AnswerInput(serializers.Serializer):
    toolCallId = StrictCharField(max_length=128, help_text="The ask_user call the run waits on.")
    answer = serializers.JSONField(help_text="An option or free text; with multi_select a list of options (and at most one free text).")


class ApproveInput(serializers.Serializer):
    toolCallId = StrictCharField(max_length=128, help_text="The tool call the run waits on for approval.")
    decision = serializers.ChoiceField(choices=["allow", "deny"])
    scope = serializers.ChoiceField(choices=["once", "session"], required=False, default="once", help_text="session: allow this tool (or, with prefix, these bash commands) for the rest of the session.")
    prefix = StrictCharField(required=False, allow_blank=True, max_length=500, default="", help_text="bash only, with scope session: allow commands that start with this.")
    note = StrictCharField(required=False, allow_blank=True, max_length=2000, default="", help_text="Shown to the model with a denial.")
    subagentRunId = serializers.UUIDField(
        required=False, allow_null=True, default=None, help_text="A subagent child's call: the child's run id (GET approvals/ lists them)."
    )


class SubagentApprovalOut(serializers.Serializer):
    """A call that waits for a person, and the child that made it (null: the session's own run)."""

    kind = serializers.CharField()
    toolCallId = serializers.CharField()
    tool = serializers.CharField()
    arguments = serializers.JSONField(required=False)
    mode = serializers.CharField(required=False)
    command = serializers.CharField(required=False)
    cwd = serializers.CharField(required=False)
    path = serializers.CharField(required=False)
    diff = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    expiresAt = serializers.IntegerField(required=False)
    subagent = serializers.JSONField(allow_null=True, help_text="runId, agent, task, taskIndex, depth, batchId of the child; null for the run's own call.")


class SessionApprovalsOut(serializers.Serializer):
    approvals = SubagentApprovalOut(many=True)


class ApproveOut(serializers.Serializer):
    run = RunOut(required=False, help_text="The session's run, resumed (a decision on the run's own call).")
    approval = SubagentApprovalOut(required=False, help_text="The child's request, decided (a decision with subagentRunId).")


class PermissionModeInput(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["auto", "ask_changes", "ask_all", "plan_only"], help_text="The session's own approval mode (the agent's still applies when stricter).")


class AnswerOut(serializers.Serializer):
    run = RunOut()


class RegenerateOut(serializers.Serializer):
    run = RunOut()


class SessionSearchHitOut(serializers.Serializer):
    session = SessionOut()
    match = serializers.ChoiceField(choices=["title", "content"])
    entryId = serializers.CharField(allow_null=True, help_text="A content match: the message that holds the text.")
    snippet = serializers.CharField(allow_null=True, help_text="A content match: the text around it.")


class SessionSearchOut(serializers.Serializer):
    results = SessionSearchHitOut(many=True)
    scanned = serializers.IntegerField(help_text="How many of the most recently updated sessions were looked into (bounded).")


class AbortOut(serializers.Serializer):
    run = RunOut(allow_null=True)


class SwitchLeafOut(serializers.Serializer):
    leafId = serializers.CharField(allow_null=True)
    editorText = serializers.CharField(allow_null=True)
    summaryEntry = EntryField(allow_null=True)
    revision = serializers.IntegerField()


class EntryResultOut(serializers.Serializer):
    entry = EntryField()
    revision = serializers.IntegerField()


class MeOut(serializers.Serializer):
    username = serializers.CharField()
    isStaff = serializers.BooleanField()
    auth = serializers.ChoiceField(choices=["session", "token"])
    tokenScope = serializers.CharField(allow_null=True)


class CsrfOut(serializers.Serializer):
    csrfToken = serializers.CharField()


# --------------------------------------------------------------------------- integration tokens


class TokenOut(serializers.Serializer):
    id = serializers.IntegerField()
    prefix = serializers.CharField(help_text="The token's first characters (the rest is never stored).")
    user = serializers.CharField(source="user.username")
    name = serializers.CharField()
    scope = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)


class TokenCreateInput(serializers.Serializer):
    name = StrictCharField(required=False, allow_blank=True, max_length=100)
    readOnly = serializers.BooleanField(required=False, default=False)
    days = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=3650)


class TokenIssuedOut(serializers.Serializer):
    token = TokenOut()
    secret = serializers.CharField(help_text="The token itself: shown this once, stored only as a digest.")
