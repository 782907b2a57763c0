"""The model registry and the agents: which model answers, with which tools and workspace
(docs/runtime.md, docs/llm.md)."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from runtime.llm.clients import default_base_url, endpoint_origin
from runtime.llm.options import (
    option_errors,  # the options' schema (Django-free, like the spec)
)
from runtime.llm.spec import (
    THINKING_LEVELS,  # the one list (Pi's levels); re-exported for the forms and the API
)
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
