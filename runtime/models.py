"""Agents, the model registry and runs (docs/runtime.md)."""

from __future__ import annotations

import os
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from runtime.llm.clients import default_base_url, endpoint_origin
from runtime.llm.options import (
    option_errors,  # the options' schema (Django-free, like the spec)
)
from runtime.llm.spec import (
    THINKING_LEVELS,  # the one list (Pi's levels); re-exported for the forms and the API
)
from sessions_tree.models import IdField  # exact comparison on MariaDB (binary, no pad)
from toolcatalog.environment import server_setting_reason, tool_variable_reason

SLUG = RegexValidator(r"^[a-z0-9][a-z0-9._-]{0,63}$", "lowercase letters, digits, '.', '_' and '-' (max 64)")
#: The permission that lets a person choose where API keys go: a model's provider kind, base
#: URL and key variable (docs/security.md). Superusers have it; no area's change permission implies it.
DIRECT_KEYS_CODENAME = "direct_model_keys"
DIRECT_KEYS_PERMISSION = f"runtime.{DIRECT_KEYS_CODENAME}"
#: The fields that direct a key: changing any of them (or creating a model with a key) needs it.
CREDENTIAL_FIELDS = ("provider_kind", "base_url", "api_key_env")


def rules_dirs() -> tuple[str, ...]:
    """Where a scripted model's ``rules`` file may come from: the rules shipped with Neta and
    ``NETA_SCRIPTED_RULES_DIR``."""
    from runtime.llm.scripted import (
        PACKAGE_DIR,  # runtime.llm.scripted parses YAML: loaded when a rules path is checked
    )

    return (str(PACKAGE_DIR), str(settings.NETA_SCRIPTED_RULES_DIR))


ENV_NAME = RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name, e.g. ANTHROPIC_API_KEY")


# The status and provider choices are labelled with their values: the console, the chat page
# and the API say `failed`, `openai-compatible` alike (docs/console.md, "Glossary").
class LlmProviderKind(models.TextChoices):
    ANTHROPIC = "anthropic", "anthropic"
    OPENAI = "openai", "openai"
    OPENAI_RESPONSES = "openai-responses", "openai-responses"
    OPENAI_COMPATIBLE = "openai-compatible", "openai-compatible"
    SCRIPTED = "scripted", "scripted"


class ModelConfig(models.Model):
    """A model Neta can talk to. Keys are never stored: only the *name* of the variable holding one."""

    name = models.CharField(max_length=64, unique=True, validators=[SLUG], verbose_name=_("name"))
    display_name = models.CharField(max_length=200, blank=True, verbose_name=_("display name"))
    provider_kind = models.CharField(
        "LLM provider", max_length=32, choices=LlmProviderKind.choices, help_text=_("Whose wire protocol this model is called with.")
    )
    provider_name = models.CharField(
        max_length=64, blank=True, help_text=_("What entries record as the provider (default: the provider kind).")
    )
    model_id = models.CharField(max_length=200, verbose_name=_("model id"))
    base_url = models.URLField(max_length=500, blank=True)
    api_key_env = models.CharField(
        max_length=128, blank=True, validators=[ENV_NAME], help_text=_("Name of the environment variable holding the key.")
    )
    context_window = models.PositiveIntegerField(default=128000, validators=[MinValueValidator(1024)], verbose_name=_("context window"))
    max_output_tokens = models.PositiveIntegerField(default=8192, validators=[MinValueValidator(1)])
    supports_tools = models.BooleanField(default=True)
    supports_thinking = models.BooleanField(default=False)
    supports_images = models.BooleanField(default=False)
    price_input = models.DecimalField("input $/M tokens", max_digits=10, decimal_places=4, default=0)
    price_output = models.DecimalField("output $/M tokens", max_digits=10, decimal_places=4, default=0)
    price_cache_read = models.DecimalField("cache read $/M tokens", max_digits=10, decimal_places=4, default=0)
    price_cache_write = models.DecimalField("cache write $/M tokens", max_digits=10, decimal_places=4, default=0)
    options = models.JSONField(default=dict, blank=True, help_text=_("Provider options, e.g. scripted rules."))
    enabled = models.BooleanField(default=True, verbose_name=_("enabled"))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("model")  # the console's word (docs/console.md, "Glossary")
        verbose_name_plural = _("models")
        permissions = [(DIRECT_KEYS_CODENAME, "Can direct API keys (a model's provider, endpoint and key variable)")]

    def __str__(self) -> str:
        return self.display_name or self.name

    @property
    def endpoint(self) -> str:
        """Where this model's calls (and its key) go: the base URL, else the provider's own API."""
        return self.base_url or default_base_url(self.provider_kind) or ""

    def key_conflicts(self) -> list[str]:
        """Other models that send this model's key variable to another endpoint (empty: none).
        One key variable, one endpoint: a key is sent only where the models naming it point."""
        if not self.api_key_env or self.provider_kind == LlmProviderKind.SCRIPTED:
            return []
        mine = endpoint_origin(self.endpoint)
        others = ModelConfig.objects.filter(api_key_env=self.api_key_env).exclude(provider_kind=LlmProviderKind.SCRIPTED)
        if self.pk is not None:
            others = others.exclude(pk=self.pk)
        return [
            f"{other.name!r} sends {self.api_key_env} to {endpoint_origin(other.endpoint)}"
            for other in others.only("name", "provider_kind", "base_url").order_by("name")
            if endpoint_origin(other.endpoint) != mine
        ]

    def clean(self):
        errors = {}
        if self.api_key_env:
            refused = server_setting_reason(self.api_key_env)
            if refused:
                errors["api_key_env"] = refused
            elif self.provider_kind != LlmProviderKind.SCRIPTED:
                conflicts = self.key_conflicts()
                handed = tools_handed(self.api_key_env)
                if conflicts:
                    errors["api_key_env"] = (
                        f"{self.api_key_env} already goes to another endpoint ({'; '.join(conflicts)}): a key is sent to one "
                        "endpoint only — point this model there too, or name another variable"
                    )
                elif handed:
                    errors["api_key_env"] = (
                        f"{self.api_key_env} is handed to tools ({'; '.join(handed)}): a provider key goes to its model's "
                        "endpoint only — name another variable, or take it out of there first"
                    )
        if self.provider_kind in (LlmProviderKind.OPENAI_COMPATIBLE,) and not self.base_url:
            errors["base_url"] = "an OpenAI-compatible endpoint needs a base URL"
        if self.provider_kind in (LlmProviderKind.ANTHROPIC, LlmProviderKind.OPENAI, LlmProviderKind.OPENAI_RESPONSES, LlmProviderKind.OPENAI_COMPATIBLE) and not self.api_key_env:
            errors.setdefault("api_key_env", "name the environment variable that holds the API key")
        if self.max_output_tokens and self.context_window and self.max_output_tokens >= self.context_window:
            errors["max_output_tokens"] = "must be smaller than the context window"
        option_problems = option_errors(self.provider_kind, self.options, base_dir=settings.BASE_DIR, rules_dirs=rules_dirs())
        if option_problems:
            errors["options"] = option_problems
        if errors:
            raise ValidationError(errors)

    @property
    def key_is_set(self) -> bool:
        return bool(self.api_key_env) and not server_setting_reason(self.api_key_env) and bool(os.environ.get(self.api_key_env))

    @property
    def usable(self) -> bool:
        """Enabled and, for a remote provider, its key variable is set."""
        if not self.enabled:
            return False
        return self.provider_kind == LlmProviderKind.SCRIPTED or self.key_is_set

    @property
    def prices(self) -> dict:
        return {
            "input": float(self.price_input),
            "output": float(self.price_output),
            "cacheRead": float(self.price_cache_read),
            "cacheWrite": float(self.price_cache_write),
            # A 1-hour cache write (Anthropic, cache "long"): twice the input price, as Anthropic bills it.
            "cacheWrite1h": float(self.price_input) * 2,
        }


class SummarizeOnSwitch(models.TextChoices):
    """Whether the chat page's tree moves summarize the branch they leave (docs/chat.md,
    "Branch summaries"). Everyday moves — versions, edits, regenerate — never do."""

    ASK_LONG = "ask_long", "ask when a tree move leaves a long branch"
    ASK = "ask", "ask on every tree move that leaves messages"
    ALWAYS = "always"
    NEVER = "never"


class WorkspaceMode(models.TextChoices):
    """Where an agent's tools work (runtime/agents/workspaces.py, docs/runtime.md)."""

    PER_SESSION = "per_session", "a directory per session"
    PER_USER = "per_user", "a directory per user"
    SHARED = "shared", "one workspace shared by every user"


# The file provider names a folder after each session's working directory (Pi's slug,
# one path component): the agent's workspace plus "/sessions/<session id>" must fit.
MAX_WORKSPACE_BYTES = 200


class Agent(models.Model):
    name = models.CharField(max_length=64, unique=True, validators=[SLUG], verbose_name=_("name"))
    description = models.TextField(blank=True)
    system_prompt = models.TextField(blank=True)
    model = models.ForeignKey(ModelConfig, on_delete=models.PROTECT, related_name="agents", verbose_name=_("model"))
    # Tried in order when a call to the model fails before any output with an error that may
    # pass (runtime/runs/failover.py, docs/llm.md "Failover"): model names, each at most once.
    fallback_models = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            _("Models tried in this order when a call fails before any output (connection, timeout, 429, 5xx, "
            "overloaded), or a larger-window one on a context overflow. Enabled models, each once, not the agent's own.")
        ),
    )
    session_provider = models.CharField(
        "session store",
        max_length=16,
        choices=[("file", "file"), ("mysql", "mysql")],
        default="file",
        help_text=_("Where this agent's new sessions are kept: a JSONL file each, or MySQL rows. Existing sessions stay in their store."),
    )
    restore_last_session = models.BooleanField(default=True)
    cwd = models.CharField(max_length=1000, blank=True, help_text=_("Working directory (default: NETA_WORKSPACE_DIR)."))
    workspace_roots = models.JSONField(default=list, blank=True, help_text=_("Extra roots tools may touch (list of paths)."))
    workspace_mode = models.CharField(
        max_length=16,
        choices=WorkspaceMode.choices,
        default=WorkspaceMode.PER_SESSION,
        help_text=(
            _("Where tools work: <workspace>/sessions/<session id>/ (per session), <workspace>/users/<user id>/ "
            "(per user), or the workspace itself, shared by every user of the agent (a deliberate choice).")
        ), verbose_name=_("workspace mode")
    )
    tool_policy = models.JSONField(default=dict, blank=True)
    skill_policy = models.JSONField(default=dict, blank=True)
    subagent_policy = models.JSONField(default=dict, blank=True)
    compaction_enabled = models.BooleanField(default=True)
    compaction_reserve_tokens = models.PositiveIntegerField(default=16384)
    compaction_keep_recent_tokens = models.PositiveIntegerField(default=20000)
    summarize_on_switch = models.CharField(
        max_length=16, choices=SummarizeOnSwitch.choices, default=SummarizeOnSwitch.ASK_LONG,
        help_text=_("The chat page's tree moves: offer a summary of the branch left (ask_long: only a long one). Versions, edits and regenerate never ask."),
    )  # fmt: skip
    branch_summary_reserve_tokens = models.PositiveIntegerField(default=16384)
    thinking_level = models.CharField(max_length=16, choices=[(t, t) for t in THINKING_LEVELS], default="off")
    max_tool_rounds = models.PositiveIntegerField(default=50, validators=[MinValueValidator(1)])
    enabled = models.BooleanField(default=True, verbose_name=_("enabled"))
    # Who may use it (runtime/agents/access.py): everyone, unless restricted to the users and
    # groups named. Edited on the console's access page (agent_set_access), not the form.
    access_restricted = models.BooleanField(
        "only the users and groups named may use it", default=False,
        help_text=_("Off: every user may use this agent (while it is enabled)."),
    )  # fmt: skip
    allowed_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="usable_agents")
    allowed_groups = models.ManyToManyField("auth.Group", blank=True, related_name="usable_agents")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        from skills_registry.policy import (  # the validators load after the models (they import apps)
            SkillPolicy,
            SkillPolicyError,
        )
        from toolcatalog.policy import (  # the validators load after the models (they import apps)
            PolicyError,
            ToolPolicy,
        )

        errors: dict[str, list[str]] = {}
        try:
            tool_policy = ToolPolicy.from_dict(self.tool_policy or {})
        except PolicyError as exc:
            errors["tool_policy"] = [str(exc)]
        else:
            keys = model_key_names()
            refused = [reason for name in tool_policy.env_passthrough if (reason := tool_variable_reason(name, keys=keys))]
            if refused:
                errors["tool_policy"] = [f"env_passthrough: {reason}" for reason in refused]
        try:
            SkillPolicy.from_dict(self.skill_policy or {})
        except SkillPolicyError as exc:
            errors["skill_policy"] = [str(exc)]
        from runtime.agents.subagent_policy import (  # the validators load after the models (they import apps)
            SubagentPolicy,
            SubagentPolicyError,
        )
        from toolcatalog.protocol import (
            tool_names,  # the validators load after the models (they import apps)
        )

        try:
            SubagentPolicy.from_dict(
                self.subagent_policy, known_agents=[*Agent.objects.values_list("name", flat=True), self.name], known_tools=tool_names()
            )
        except SubagentPolicyError as exc:
            errors["subagent_policy"] = [str(exc)]
        if not isinstance(self.workspace_roots, list) or not all(isinstance(r, str) and r for r in self.workspace_roots):
            errors["workspace_roots"] = ["must be a list of paths"]
        if self.cwd and not os.path.isabs(self.cwd):
            errors["cwd"] = ["must be an absolute path"]
        elif len(os.fsencode(self.working_directory)) > MAX_WORKSPACE_BYTES:
            errors["cwd"] = [f"must be at most {MAX_WORKSPACE_BYTES} bytes long (session folders are named after it)"]
        if "cwd" not in errors and "workspace_roots" not in errors:
            from runtime.agents.workspaces import (
                workspace_conflicts,  # a cycle: the workspace rules query Agent
            )

            problems = workspace_conflicts(self)
            if problems:
                errors["workspace_mode"] = problems
        if self.compaction_reserve_tokens and self.model_id and self.compaction_reserve_tokens >= self.model.context_window:
            errors["compaction_reserve_tokens"] = ["must be smaller than the model's context window"]
        # A fallback disabled or deleted since it was chosen is not an error of this save (the
        # agent page warns; failover skips it): other edits of the agent must not be blocked.
        kept = None
        if self.pk and self.fallback_models and isinstance(self.fallback_models, list):
            kept = Agent.objects.filter(pk=self.pk).values_list("fallback_models", flat=True).first()
        problems = fallback_model_errors(
            self.fallback_models, primary=self.model.name if self.model_id else None, kept=kept if isinstance(kept, list) else ()
        )
        if problems:
            errors["fallback_models"] = problems
        if errors:
            raise ValidationError(errors)

    @property
    def working_directory(self) -> str:
        return self.cwd or str(settings.NETA_WORKSPACE_DIR)


def tools_handed(name: str) -> list[str]:
    """Where the variable ``name`` is handed to tools: agents' ``env_passthrough``, MCP servers' ``env_names``."""
    from toolcatalog.models import McpServer  # the catalog's models load with their app

    found = [
        f"agent {agent!r} passes it to bash"
        for agent, policy in Agent.objects.values_list("name", "tool_policy").order_by("name")
        if isinstance(policy, dict) and name in (policy.get("env_passthrough") or [])
    ]
    found += [f"MCP server {server!r} is given it" for server, names in McpServer.objects.values_list("name", "env_names").order_by("name") if isinstance(names, list) and name in names]
    return found


def model_key_names() -> dict[str, str]:
    """Every key variable a remote model names (name → which model): none may be handed to a tool."""
    rows = ModelConfig.objects.exclude(api_key_env="").exclude(provider_kind=LlmProviderKind.SCRIPTED).values_list("api_key_env", "name")
    found: dict[str, str] = {}
    for key, name in rows.order_by("name"):
        found.setdefault(key, f"the API key of model {name!r}")
    return found


def fallback_model_errors(value, *, primary: str | None, kept=()) -> list[str]:
    """What is wrong with an agent's ``fallback_models`` (empty: nothing): a list of names of
    existing, enabled models, none twice, not the agent's own ``primary``. Names in ``kept``
    (the saved list) may be disabled or gone since: only a newly named model must be usable."""
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        return [f"must be a list of model names, got {value!r}"]
    if not value:
        return []
    problems = []
    found = {m.name: m for m in ModelConfig.objects.filter(name__in=value)}
    seen: set[str] = set()
    for name in value:
        if name in seen:
            problems.append(f"{name!r} is listed twice (each model is tried at most once)")
            continue
        seen.add(name)
        model = found.get(name)
        if name in kept and name != primary:
            continue
        if name == primary:
            problems.append(f"{name!r} is the agent's own model (a fallback must be another model)")
        elif model is None:
            known = ", ".join(ModelConfig.objects.filter(enabled=True).exclude(name=primary or "").values_list("name", flat=True)[:20])
            problems.append(f"{name!r} is not a model (enabled models: {known or 'none'})")
        elif not model.enabled:
            problems.append(f"{name!r} is disabled")
    return problems


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


# --------------------------------------------------------------------------- the chat page's own


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
    to rebuild the body it sent byte for byte (``runtime.llm.bodies``)."""

    run = models.ForeignKey(AgentRun, null=True, blank=True, on_delete=models.CASCADE, related_name="model_calls")
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

