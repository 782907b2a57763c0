"""Structured editors for an agent's tool, skill and subagent policies (no JavaScript).

Each form starts from the stored policy and changes only the keys it shows, so a key the
form has no field for is kept as stored. The dict it builds is validated by the same
parsers ``Agent.clean`` runs (``agent_update``), and their messages are shown per field.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from runtime.agents.subagent_policy import (
    DELEGATE_TOOLS,
    SubagentPolicy,
    SubagentPolicyError,
)
from runtime.models import Agent
from skills_registry.models import SkillResource
from skills_registry.policy import SkillPolicy, SkillPolicyError
from toolcatalog.manifest import WORKER_ROUTES
from toolcatalog.policy import PolicyError, ToolPolicy
from toolcatalog.protocol import all_tools

TRI = [("", "default"), ("on", "on"), ("off", "off")]
SUB = [("", "default"), ("yes", "allowed"), ("no", "not allowed")]
ROUTES = [("", "default"), *((r, r) for r in WORKER_ROUTES)]


def _names(text: str) -> list[str]:
    return [n for n in (part.strip() for part in text.replace("\n", ",").split(",")) if n]


class ToolPolicyForm(forms.Form):
    """``inherit_core_tools``, ``network``, ``env_passthrough``, and per tool: on/off
    (``enabled``/``disabled``), allowed in subagents, its prompt hint and worker route."""

    inherit_core_tools = forms.BooleanField(required=False, label=_("inherit core tools"), help_text=_("Builtin tools are on unless turned off below."))
    network = forms.BooleanField(required=False, help_text=_("Network inside the bwrap sandbox."))
    env_passthrough = forms.CharField(required=False, label=_("environment passed to bash"), help_text=_("Variable names, comma-separated."))
    approval = forms.ChoiceField(
        choices=[
            ("auto", _("auto: every call runs")),
            ("ask_changes", _("ask for changes: writes, edits, bash, changing MCP tools and fetches wait for a person")),
            ("ask_all", _("ask for everything: every call but the plan and questions waits")),
            ("plan_only", _("plan only: no changing tool runs (nor is offered)")),
        ],
        required=False,
        label=_("approvals"),
        help_text=_("Which tool calls wait for a person's Allow in the chat page; a session may tighten this, never loosen it."),
    )

    def __init__(self, *args, policy: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = dict(policy or {})
        self.tools = [t for t in all_tools() if t.name not in DELEGATE_TOOLS]  # the subagent policy turns those on
        enabled, disabled = set(self.stored.get("enabled") or []), set(self.stored.get("disabled") or [])
        per_tool = self.stored.get("per_tool") or {}
        self.initial.update(
            inherit_core_tools=self.stored.get("inherit_core_tools", True),
            network=self.stored.get("network", False),
            env_passthrough=", ".join(self.stored.get("env_passthrough") or []),
            approval=self.stored.get("approval", "auto"),
        )
        self.rows = []
        for tool in self.tools:
            n = tool.name
            rule = per_tool.get(n) if isinstance(per_tool.get(n), dict) else {}
            mode = "on" if n in enabled or rule.get("enabled") is True else "off" if n in disabled or rule.get("enabled") is False else ""
            sub = {True: "yes", False: "no"}.get(rule.get("allow_in_subagent"), "")
            self.fields[f"{n}__mode"] = forms.ChoiceField(choices=TRI, required=False, label=n)
            self.fields[f"{n}__sub"] = forms.ChoiceField(choices=SUB, required=False, label=_("in subagents"))
            self.fields[f"{n}__route"] = forms.ChoiceField(choices=ROUTES, required=False, label=_("worker route"))
            self.fields[f"{n}__hint"] = forms.CharField(required=False, label=_("prompt hint"), widget=forms.TextInput(attrs={"size": 40}))
            self.initial.update({f"{n}__mode": mode, f"{n}__sub": sub, f"{n}__route": rule.get("worker_routing") or "", f"{n}__hint": rule.get("prompt_hint") or ""})
            self.rows.append((tool, [self[f"{n}__mode"], self[f"{n}__sub"], self[f"{n}__route"], self[f"{n}__hint"]]))

    def policy(self) -> dict:
        """The tool policy the form describes (call after ``is_valid``)."""
        data = self.cleaned_data
        out = {
            k: v for k, v in self.stored.items() if k not in ("enabled", "disabled", "per_tool", "inherit_core_tools", "network", "env_passthrough", "approval")
        }
        known = {t.name for t in self.tools}
        # Delegate tools (and any other name the editor does not show) keep their stored entries.
        keep_on = [n for n in self.stored.get("enabled") or [] if n not in known and n in {t.name for t in all_tools()}]
        keep_off = [n for n in self.stored.get("disabled") or [] if n not in known and n in {t.name for t in all_tools()}]
        registered = {t.name for t in all_tools()}
        stored_rules = self.stored.get("per_tool") if isinstance(self.stored.get("per_tool"), dict) else {}
        kept_rules = {n: r for n, r in stored_rules.items() if n not in known and n in registered}  # the delegate tools'
        enabled, disabled, per_tool = list(keep_on), list(keep_off), dict(kept_rules)
        for tool in self.tools:
            n = tool.name
            mode = data.get(f"{n}__mode")
            if mode == "on":
                enabled.append(n)
            elif mode == "off":
                disabled.append(n)
            rule = {}
            if data.get(f"{n}__sub"):
                rule["allow_in_subagent"] = data[f"{n}__sub"] == "yes"
            if data.get(f"{n}__route"):
                rule["worker_routing"] = data[f"{n}__route"]
            if data.get(f"{n}__hint"):
                rule["prompt_hint"] = data[f"{n}__hint"]
            if rule:
                per_tool[n] = rule
        out.update(
            inherit_core_tools=bool(data.get("inherit_core_tools")), network=bool(data.get("network")),
            enabled=enabled, disabled=disabled, per_tool=per_tool, env_passthrough=_names(data.get("env_passthrough") or ""),
            approval=data.get("approval") or "auto",
        )  # fmt: skip
        return out


def _skill_choices(extra=()) -> list[tuple[str, str]]:
    names = sorted(set(SkillResource.objects.values_list("name", flat=True)) | set(extra))
    return [(n, n) for n in names]


class SkillPolicyForm(forms.Form):
    allow_all = forms.ChoiceField(
        choices=[("all", "every skill"), ("listed", "only the skills ticked below")], widget=forms.RadioSelect, label=_("the agent may use")
    )
    allowed = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("allowed skills"))
    subagent_allowed = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("subagents may use"))
    index_budget_chars = forms.IntegerField(required=False, min_value=1, label=_("skill index budget (characters)"))
    index_budget_tokens = forms.IntegerField(required=False, min_value=1, label=_("skill index budget (tokens)"))

    def __init__(self, *args, policy: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = dict(policy or {})
        allowed = self.stored.get("allowed", "all")
        listed = allowed if isinstance(allowed, list) else []
        sub = self.stored.get("subagent_allowed") or []
        choices = _skill_choices([*listed, *sub])
        self.fields["allowed"].choices = choices
        self.fields["subagent_allowed"].choices = choices
        self.initial.update(
            allow_all="all" if allowed == "all" else "listed", allowed=listed, subagent_allowed=list(sub),
            index_budget_chars=self.stored.get("index_budget_chars"), index_budget_tokens=self.stored.get("index_budget_tokens"),
        )  # fmt: skip

    def policy(self) -> dict:
        data = self.cleaned_data
        out = dict(self.stored)
        out["allowed"] = "all" if data["allow_all"] == "all" else list(data.get("allowed") or [])
        out["subagent_allowed"] = list(data.get("subagent_allowed") or [])
        for key in ("index_budget_chars", "index_budget_tokens"):
            if data.get(key) is None:
                out.pop(key, None)
            else:
                out[key] = data[key]
        return out


class SubagentPolicyForm(forms.Form):
    enabled = forms.BooleanField(required=False, label=_("may delegate to subagents"))
    agents = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("child agents"))
    max_depth = forms.IntegerField(min_value=1, label=_("max depth"))
    max_tasks_per_call = forms.IntegerField(min_value=1, label=_("tasks per call"))
    max_concurrency = forms.IntegerField(min_value=1, label=_("at once per run"))
    max_concurrency_per_session = forms.IntegerField(min_value=1, label=_("at once per session"))
    max_turns = forms.IntegerField(min_value=1, label=_("per child: turns"))
    max_tool_calls = forms.IntegerField(min_value=0, label=_("per child: tool calls"))
    max_tokens = forms.IntegerField(required=False, min_value=1, label=_("per child: tokens (empty: no limit)"))
    max_cost = forms.FloatField(required=False, min_value=0, label=_("per child: cost in USD (empty: no limit)"))
    wall_clock_seconds = forms.FloatField(min_value=0, label=_("per child: wall clock (s)"))
    idle_seconds = forms.FloatField(min_value=0, label=_("per child: idle (s)"))
    tools_mode = forms.ChoiceField(
        choices=[("inherit", "what the parent and the child agent both have"), ("listed", "only the tools ticked below")],
        widget=forms.RadioSelect, label=_("child tools"),
    )  # fmt: skip
    tools_allow = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("allowed tools"))
    tools_deny = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("denied tools"))
    skills = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label=_("skills passed to children"))

    BUDGET = ("max_turns", "max_tool_calls", "max_tokens", "max_cost", "wall_clock_seconds", "idle_seconds")
    LIMITS = ("max_depth", "max_tasks_per_call", "max_concurrency", "max_concurrency_per_session")

    def __init__(self, *args, policy: dict, agent: Agent, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = dict(policy or {})
        defaults = SubagentPolicy().to_dict()
        merged = {**defaults, **self.stored}
        budget = {**defaults["child_budget"], **(self.stored.get("child_budget") or {})}
        tools = {**defaults["tools"], **(self.stored.get("tools") or {})}
        tool_names = sorted({t.name for t in all_tools()} | set(tools.get("allow") or []) | set(tools.get("deny") or []))
        agent_names = sorted(set(Agent.objects.values_list("name", flat=True)) | set(merged.get("agents") or []) | {agent.name})
        self.fields["agents"].choices = [(n, n) for n in agent_names]
        self.fields["tools_allow"].choices = self.fields["tools_deny"].choices = [(n, n) for n in tool_names]
        self.fields["skills"].choices = _skill_choices(merged.get("skills") or [])
        self.initial.update(
            enabled=merged.get("enabled", False), agents=list(merged.get("agents") or []),
            **{k: merged.get(k) for k in self.LIMITS}, **{k: budget.get(k) for k in self.BUDGET},
            tools_mode="inherit" if tools.get("allow") is None else "listed",
            tools_allow=list(tools.get("allow") or []), tools_deny=list(tools.get("deny") or []),
            skills=list(merged.get("skills") or []),
        )  # fmt: skip

    def policy(self) -> dict:
        data = self.cleaned_data
        out = dict(self.stored)
        out["enabled"] = bool(data.get("enabled"))
        out["agents"] = list(data.get("agents") or [])
        for key in self.LIMITS:
            out[key] = data[key]
        out["child_budget"] = {**(self.stored.get("child_budget") or {}), **{k: data.get(k) for k in self.BUDGET}}
        allow = None if data["tools_mode"] == "inherit" else list(data.get("tools_allow") or [])
        out["tools"] = {"allow": allow, "deny": list(data.get("tools_deny") or [])}
        out["skills"] = list(data.get("skills") or [])
        return out


def _parsed(name: str, data):
    if name == "tool_policy":
        return ToolPolicy.from_dict(data or {}, unknown_tools="ignore")
    if name == "skill_policy":
        return SkillPolicy.from_dict(data or {})
    return SubagentPolicy.from_dict(data)


def changed_policies(agent: Agent, proposed: dict) -> dict:
    """The proposed policies that mean something else than the stored ones (a form that
    only spells the same policy out in full leaves the stored JSON as it is)."""
    out = {}
    for name, value in proposed.items():
        try:
            same = _parsed(name, value) == _parsed(name, getattr(agent, name))
        except (PolicyError, SkillPolicyError, SubagentPolicyError):
            same = False  # invalid on either side: let the validation say so
        if not same:
            out[name] = value
    return out


POLICY_FORMS = {"tool_policy": ToolPolicyForm, "skill_policy": SkillPolicyForm, "subagent_policy": SubagentPolicyForm}


class AgentAccessForm(forms.Form):
    """Who may use an agent (``agent_set_access``)."""

    restricted = forms.BooleanField(required=False, label=_("only the users and groups ticked may use it"))
    users = forms.ModelMultipleChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple)
    groups = forms.ModelMultipleChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, agent: Agent, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["users"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["groups"].queryset = Group.objects.order_by("name")
        self.initial.update(
            restricted=agent.access_restricted, users=list(agent.allowed_users.all()), groups=list(agent.allowed_groups.all())
        )
