"""The console under hostile use: a view-only staff account posting to every write the
console has, bad input on every form, objects that do not exist. Each answer is a 4xx or the form
again with the reason, never a server error, and nothing stored changes."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry
from runtime.api.tokens import api_token_create
from runtime.models import Agent, AgentRun, ApiToken, ModelConfig
from runtime.runs.prompts import session_prompt
from sessions_tree.models import AgentSession, SessionEntry
from skills_registry.models import SkillResource
from toolcatalog.models import ToolConfig
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(driver_for, owner, staff):
    """A session with entries and a finished run, a second one with a queued run, a model, a tool
    row, a token, a skill row, an audit row."""
    d = driver_for(rules(default={"reply": [{"text": "answer"}]}))
    assert d.prompt("hello").status == "completed"
    other = d.__class__(d.agent)
    queued = session_prompt(actor=None, session_id=other.session_id, text="wait", dispatch=False).run
    ToolConfig.objects.create(name="bash", enabled=True)
    token = api_token_create(user=owner, name="ci").token
    skill = SkillResource.objects.create(
        path_key="k1", name="lint", description="d", scope="workspace", fingerprint="f" * 64, entry_file="/x/lint/SKILL.md",
        base_dir="/x/lint", status="active", last_seen_at=timezone.now(),
    )  # fmt: skip
    AuditEntry.objects.create(actor=staff, actor_name="staff", action="agent.change", target_type="runtime.agent", target_id="1", via="console")
    return {"session": d.session_id, "busy": other.session_id, "agent": d.agent, "model": d.agent.model, "run": queued, "token": token, "skill": skill}


def state() -> str:
    """A digest of everything a console write could touch."""
    rows = {
        "sessions": list(AgentSession.objects.order_by("session_id").values_list("session_id", "title", "agent", "status", "leaf_entry_id", "revision", "entry_count")),
        "entries": SessionEntry.objects.count(),
        "agents": list(Agent.objects.order_by("name").values_list("name", "model_id", "tool_policy", "skill_policy", "subagent_policy", "enabled", "access_restricted")),
        "models": list(ModelConfig.objects.order_by("name").values_list("name", "options", "context_window", "enabled", "api_key_env")),
        "runs": list(AgentRun.objects.order_by("id").values_list("id", "status", "cancelled_by_id")),
        "tokens": list(ApiToken.objects.order_by("id").values_list("id", "name", "digest", "revoked_at")),
        "tools": list(ToolConfig.objects.order_by("name").values_list("name", "enabled", "allow_in_subagent", "worker_routing", "renderer_key")),
        "skills": list(SkillResource.objects.order_by("id").values_list("id", "disabled", "allow_in_subagent", "requires_privilege")),
        "audit": AuditEntry.objects.count(),
    }
    return hashlib.sha256(json.dumps(rows, default=str, sort_keys=True).encode()).hexdigest()


def model_form(model: ModelConfig, **overrides) -> dict:
    data = {
        "display_name": model.display_name, "provider_kind": model.provider_kind, "provider_name": model.provider_name,
        "model_id": model.model_id, "base_url": model.base_url, "api_key_env": model.api_key_env, "context_window": model.context_window,
        "max_output_tokens": model.max_output_tokens, "supports_tools": "on", "price_input": 0, "price_output": 0,
        "price_cache_read": 0, "price_cache_write": 0, "options": json.dumps(model.options), "enabled": "on",
    }  # fmt: skip
    return {**data, **overrides}


def writes(w) -> list[tuple[str, dict]]:
    """Every write the console offers: (url, POST data)."""
    sid, busy, agent, model, token, skill = w["session"], w["busy"], w["agent"], w["model"], w["token"], w["skill"]
    session = lambda what, s=sid: reverse(f"admin:sessions_tree_agentsession_{what}", args=[s])  # noqa: E731
    changelist = lambda name: reverse(f"admin:{name}_changelist")  # noqa: E731
    return [
        (reverse("admin:runtime_modelconfig_add"), model_form(model, name="new-model")),
        (reverse("admin:runtime_modelconfig_change", args=[model.pk]), model_form(model, context_window=1234)),
        (reverse("admin:runtime_modelconfig_delete", args=[model.pk]), {"post": "yes"}),
        (reverse("admin:runtime_modelconfig_test", args=[model.pk]), {}),
        (reverse("admin:runtime_agent_add"), {"name": "new-agent", "model": model.pk}),
        (reverse("admin:runtime_agent_change", args=[agent.pk]), {"model": model.pk, "enabled": ""}),
        (reverse("admin:runtime_agent_delete", args=[agent.pk]), {"post": "yes"}),
        (reverse("admin:runtime_agent_policies", args=[agent.pk]), {"tools-bash__mode": "off"}),
        (reverse("admin:runtime_agent_access", args=[agent.pk]), {"restricted": "on"}),
        (changelist("runtime_agentrun"), {"action": "abort_runs", "_selected_action": [w["run"].pk]}),
        (reverse("admin:runtime_apitoken_add"), {"user": token.user_id, "name": "x", "scope": "read"}),
        (reverse("admin:runtime_apitoken_change", args=[token.pk]), {"name": "renamed"}),
        (changelist("runtime_apitoken"), {"action": "revoke_tokens", "_selected_action": [token.pk]}),
        (changelist("runtime_apitoken"), {"action": "rotate_tokens", "_selected_action": [token.pk]}),
        (session("change"), {"title": "hijacked", "agent": agent.name, "status": "archived"}),
        (session("rename"), {"title": "hijacked"}),
        (session("leaf"), {"entry_id": ""}),
        (session("compact"), {}),
        (session("fork"), {}),
        (session("archive"), {}),
        (session("abort", busy), {}),
        (session("delete"), {"post": "yes"}),
        (changelist("sessions_tree_agentsession"), {"action": "delete_selected", "_selected_action": [sid], "post": "yes"}),
        (reverse("admin:console_tool", args=["bash"]), {"enabled": "", "allow_in_subagent": "", "renderer_key": ""}),
        (reverse("admin:toolcatalog_toolconfig_change", args=[ToolConfig.objects.get(name="bash").pk]), {"enabled": ""}),
        (reverse("admin:skills_registry_skillresource_sync"), {}),
        (reverse("admin:skills_registry_skillresource_import"), {"scope": "user"}),
        (changelist("skills_registry_skillresource"), {"action": "disable", "_selected_action": [skill.pk]}),
        (changelist("skills_registry_skillresource"), {"action": "remove_imported", "_selected_action": [skill.pk]}),
        (reverse("admin:audit_auditentry_change", args=[AuditEntry.objects.first().pk]), {"action": "x"}),
        (reverse("admin:audit_auditentry_delete", args=[AuditEntry.objects.first().pk]), {"post": "yes"}),
    ]


@pytest.fixture
def viewer(client, django_user_model):
    """Staff holding every view permission and nothing else."""
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client.force_login(user)
    return client


def test_a_view_only_account_can_read_every_page_and_change_nothing(viewer, world):
    sid = world["session"]
    for url in (
        "/admin/", "/admin/console/access/", "/admin/console/tools/", "/admin/console/tools/bash/",
        f"/admin/console/skills/{world['skill'].pk}/", reverse("admin:runtime_agent_policies", args=[world["agent"].pk]),
        reverse("admin:sessions_tree_agentsession_change", args=[sid]), reverse("admin:sessions_tree_agentsession_tree", args=[sid]),
        reverse("admin:sessions_tree_agentsession_context", args=[sid]),
    ):  # fmt: skip
        assert viewer.get(url).status_code == 200, url
    before = state()
    for url, data in writes(world):
        answer = viewer.post(url, data)
        if "_selected_action" in data:
            # An action the account lacks is not offered, and posting it anyway runs nothing.
            assert answer.status_code in (200, 302), (url, answer.status_code)
            assert f'value="{data["action"]}"' not in viewer.get(url).content.decode(), data["action"]
        else:
            assert answer.status_code == 403, (url, answer.status_code)
        assert state() == before, url


def test_bad_input_on_every_form_is_refused_with_the_reason_and_stores_nothing(console_admin, world):
    client = console_admin
    model, agent, sid = world["model"], world["agent"], world["session"]
    before = state()
    model_url = reverse("admin:runtime_modelconfig_change", args=[model.pk])
    for options, reason in (("{not json", "Enter a valid JSON"), ('{"max_retries": "lots"}', "unknown option"), ("[1, 2]", "must be a JSON object")):
        answer = client.post(model_url, model_form(model, options=options))
        assert answer.status_code == 200 and reason in answer.content.decode(), (options, answer.content.decode()[:300])
    answer = client.post(model_url, model_form(model, context_window="lots", api_key_env="not a name"))
    assert answer.status_code == 200 and "Enter a whole number" in answer.content.decode()
    agent_url = reverse("admin:runtime_agent_change", args=[agent.pk])
    page = client.get(agent_url).context["adminform"].form
    base = {k: v for k, v in page.initial.items() if v is not None and k in page.fields}
    base = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in base.items()}
    for field, value in (("tool_policy", "{oops"), ("tool_policy", '{"disabled": "bash"}'), ("subagent_policy", '{"enabled": true}'), ("model", "999999")):
        answer = client.post(agent_url, {**base, field: value})
        assert answer.status_code == 200 and "errorlist" in answer.content.decode(), (field, value)
    policies = reverse("admin:runtime_agent_policies", args=[agent.pk])
    assert client.post(policies, {"tools-bash__mode": "sideways", "sub-max_depth": "-3"}).status_code == 400
    access = reverse("admin:runtime_agent_access", args=[agent.pk])
    answer = client.post(access, {"restricted": "on", "users": ["999999"], "groups": ["abc"]})
    assert answer.status_code == 200 and "errorlist" in answer.content.decode()
    session = lambda what: reverse(f"admin:sessions_tree_agentsession_{what}", args=[sid])  # noqa: E731
    for what, data in (("leaf", {"entry_id": "no-such-entry"}), ("fork", {"entry_id": "no-such-entry"}), ("leaf", {"entry_id": "x" * 5000})):
        answer = client.post(session(what), data, follow=True)
        assert answer.status_code == 200 and "Refused" in answer.content.decode(), (what, data)
    meta = AgentSession.objects.get(session_id=sid)
    change = {"title": meta.title, "agent": meta.agent, "status": meta.status}
    for field, value in (("agent", "no-such-agent"), ("title", "t" * 600), ("status", "exploded")):
        answer = client.post(session("change"), {**change, field: value})
        assert answer.status_code == 200 and "errorlist" in answer.content.decode(), (field, value)
    tool = reverse("admin:console_tool", args=["bash"])
    for data in ({"enabled": "on", "renderer_key": "<script>"}, {"enabled": "on", "worker_routing": "moon"}):
        answer = client.post(tool, data)
        assert answer.status_code == 200 and "errorlist" in answer.content.decode(), data
    token_add = reverse("admin:runtime_apitoken_add")
    for data in ({"user": world["token"].user_id, "scope": "read", "days": "-5"}, {"user": "999999", "scope": "read"}, {"user": world["token"].user_id, "scope": "root"}):
        answer = client.post(token_add, data)
        assert answer.status_code == 200 and "errorlist" in answer.content.decode(), data
    skill_import = reverse("admin:skills_registry_skillresource_import")
    for upload in (SimpleUploadedFile("x.zip", b"not a zip at all"), SimpleUploadedFile("x.zip", b"")):
        answer = client.post(skill_import, {"scope": "user", "archive": upload})
        assert answer.status_code == 200 and ("errorlist" in answer.content.decode() or "errornote" in answer.content.decode())
    assert state() == before


def test_objects_that_do_not_exist_are_404_or_a_message_never_a_server_error(console_admin, world):
    client = console_admin
    for url in (
        reverse("admin:sessions_tree_agentsession_leaf", args=["no-such-session"]),
        reverse("admin:sessions_tree_agentsession_fork", args=["no-such-session"]),
        reverse("admin:sessions_tree_agentsession_compact", args=["no-such-session"]),
        reverse("admin:sessions_tree_agentsession_archive", args=["no-such-session"]),
        reverse("admin:sessions_tree_agentsession_abort", args=["no-such-session"]),
        reverse("admin:sessions_tree_agentsession_delete", args=["no-such-session"]),
        reverse("admin:runtime_agent_policies", args=[999999]),
        reverse("admin:runtime_agent_access", args=[999999]),
        reverse("admin:runtime_modelconfig_test", args=[999999]),
        "/admin/console/tools/no-such-tool/",
        "/admin/console/skills/999999/",
    ):
        assert client.post(url).status_code == 404, url
    for url in ("/admin/console/tools/no-such-tool/", "/admin/console/skills/999999/", reverse("admin:runtime_agent_policies", args=["abc"])):
        assert client.get(url).status_code == 404, url
    # Django's own pages for a missing row go back with a message.
    answer = client.get(reverse("admin:sessions_tree_agentsession_change", args=["no-such-session"]))
    assert answer.status_code == 302
    before = state()
    lists = (("runtime_agentrun", "abort_runs"), ("runtime_apitoken", "revoke_tokens"), ("sessions_tree_agentsession", "delete_selected"), ("auth_user", "delete_selected"))
    for name, action in lists:
        answer = client.post(reverse(f"admin:{name}_changelist"), {"action": action, "_selected_action": ["not-an-id", "999999"]})
        assert answer.status_code == 302, (name, answer.status_code)
        assert "nothing was done" in client.get(answer.url).content.decode(), name
    assert state() == before


@pytest.fixture
def console_admin(client, staff):
    client.force_login(staff)
    return client
