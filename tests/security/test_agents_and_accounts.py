"""Agents, accounts, groups and tokens: what a person with those areas' permissions cannot do —
hand a secret to bash, make a workspace of the server's own files, give themselves rights, or
take a superuser's identity with a token."""

from __future__ import annotations


import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from runtime.agents import keys
from runtime.agents.services import agent_update
from runtime.agents.workspaces import WorkspaceError, workspace_for
from runtime.api.tokens import api_token_create, api_token_rotate
from runtime.models import Agent, ApiToken, ModelConfig, RunStatus
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.providers import get_provider

from .security_support import PROVIDER_KEY, SECRET, logged_in

pytestmark = pytest.mark.django_db

AGENT_STAFF = ("runtime.agent:*",)


@pytest.fixture
def workspace(tmp_path, settings):
    path = tmp_path / "workspace"
    path.mkdir()
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = path
    return path


def bash_agent(workspace, **fields) -> Agent:
    """An agent whose scripted model runs one bash command and answers with what it printed."""
    script = {
        "version": 1, "delay_ms": 0,
        "rules": [{"match": {"contains": "run"}, "replies": [[{"tool_call": {"name": "bash", "arguments": {"command": "echo \"[$NETA_SECRET_KEY|$ANTHROPIC_API_KEY|$NETA_DATABASE_URL]\""}}}], [{"text": "done"}]]}],
        "default": {"reply": [{"text": "ok"}]},
    }  # fmt: skip
    model = ModelConfig.objects.create(name="bash-model", provider_kind="scripted", model_id="s", options={"rules": script})
    return Agent.objects.create(name="basher", model=model, cwd=str(workspace), **fields)


def run_bash(agent: Agent) -> str:
    session_id = session_start(agent=agent).session_id
    outcome = session_prompt(session_id=session_id, text="run it", dispatch=False, actor=None)
    run = execute_run(outcome.run.run_id, sink=InMemorySink())
    assert run.status == RunStatus.COMPLETED, run.error
    results = [m for m in get_provider(agent.session_provider).build_context(session_id).messages if m["role"] == "toolResult"]
    return results[0]["content"][0]["text"]


@pytest.mark.parametrize("name", ["NETA_SECRET_KEY", "NETA_DATABASE_URL", "ANTHROPIC_API_KEY", "CELERY_BROKER_URL"])
def test_env_passthrough_refuses_server_secrets_and_provider_keys(planted, account, workspace, name):
    """Through the service the console's agent editor saves with (the API offers no policy write)."""
    agent = bash_agent(workspace)
    for actor in (account("agent-staff", *AGENT_STAFF), account("root", superuser=True)):
        with pytest.raises(ValidationError) as refused:
            agent_update(agent_id=agent.pk, actor=actor, changes={"tool_policy": {"env_passthrough": [name]}})
        assert name in str(refused.value)
    agent.refresh_from_db()
    assert agent.tool_policy == {}


def test_a_stored_passthrough_hands_bash_no_secret(planted, workspace, settings):
    """Rows written before the rule: one passing the Anthropic key to bash (the command sees
    nothing), one passing the secret key (the agent stops with the reason; nothing runs)."""
    settings.NETA_SANDBOX = "none"
    agent = bash_agent(workspace, tool_policy={"env_passthrough": ["ANTHROPIC_API_KEY"]})
    keys.forget()
    out = run_bash(agent)
    assert "[||]" in out and PROVIDER_KEY not in out
    Agent.objects.filter(pk=agent.pk).update(tool_policy={"env_passthrough": ["NETA_SECRET_KEY"]})
    agent.refresh_from_db()
    session_id = session_start(agent=agent).session_id
    outcome = session_prompt(session_id=session_id, text="run it", dispatch=False, actor=None)
    run = execute_run(outcome.run.run_id, sink=InMemorySink())
    assert run.status == RunStatus.FAILED and "NETA_SECRET_KEY" in run.error and SECRET not in run.error
    assert not [m for m in get_provider(agent.session_provider).build_context(session_id).messages if m["role"] == "toolResult"]


def test_a_model_key_handed_to_tools_cannot_become_a_models_key(planted, account, workspace):
    """The other way round: a variable an agent passes to bash is refused as a model's key."""
    bash_agent(workspace, tool_policy={"env_passthrough": ["TEAM_TOKEN"]})
    root = account("root", superuser=True)
    from runtime.agents.services import model_config_create

    with pytest.raises(ValidationError, match="handed to tools"):
        model_config_create(actor=root, fields={"name": "x", "provider_kind": "openai", "model_id": "m", "api_key_env": "TEAM_TOKEN"})


@pytest.mark.parametrize("where", ["/", "BASE", "BASE/neta", "VAR", "PARENT", "/usr/lib", "/etc", "PYTHON"])
def test_a_workspace_is_never_the_servers_own_files(planted, account, workspace, where):
    import sys

    path = (
        where.replace("BASE", str(django_settings.BASE_DIR)).replace("VAR", str(django_settings.VAR_DIR))
        .replace("PARENT", str(django_settings.BASE_DIR.parent)).replace("PYTHON", sys.prefix)
    )  # fmt: skip
    agent = bash_agent(workspace)
    staff = account("agent-staff", *AGENT_STAFF)
    for change in ({"cwd": path}, {"workspace_roots": [path], "workspace_mode": "shared"}):
        with pytest.raises(ValidationError, match="workspace"):
            agent_update(agent_id=agent.pk, actor=staff, changes=change)
    agent.refresh_from_db()
    assert agent.cwd == str(workspace) and agent.workspace_roots == []
    # A row written around the services: no tool works there.
    Agent.objects.filter(pk=agent.pk).update(cwd=path, workspace_mode="shared")
    agent.refresh_from_db()
    with pytest.raises(WorkspaceError, match="refused"):
        workspace_for(agent, session_id="x", create=False)


def test_the_default_workspace_inside_the_state_directory_is_fine(planted, settings):
    settings.NETA_WORKSPACE_DIR = django_settings.VAR_DIR / "workspace"
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="s")
    agent = Agent(name="plain", model=model)
    agent.full_clean()


def test_user_staff_cannot_give_rights(planted, account):
    boss = account("boss", superuser=True)
    clerk = account("clerk", "auth.user:*", "auth.group:*")
    client = logged_in(clerk)
    form = client.get(reverse("admin:auth_user_change", args=[clerk.pk])).content.decode()
    assert 'name="is_superuser"' not in form and 'name="user_permissions"' not in form and 'name="groups"' not in form
    every = [str(pk) for pk in Permission.objects.values_list("pk", flat=True)]
    answer = client.post(
        reverse("admin:auth_user_change", args=[clerk.pk]),
        {"username": "clerk", "is_active": "on", "is_staff": "on", "is_superuser": "on", "user_permissions": every, "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"},
    )
    assert answer.status_code == 302  # saved: what it may change was changed, the rest ignored
    clerk.refresh_from_db()
    assert not clerk.is_superuser and clerk.user_permissions.count() == 8  # the user and group permissions it had
    # A superuser's account, its password included, is not theirs to change.
    assert client.get(reverse("admin:auth_user_change", args=[boss.pk])).status_code in (200, 403)
    answer = client.post(reverse("admin:auth_user_password_change", args=[boss.pk]), {"password1": "Owned-12345!", "password2": "Owned-12345!", "usable_password": "true"})
    assert answer.status_code == 403
    boss.refresh_from_db()
    assert not boss.check_password("Owned-12345!")
    # A group carries permissions: no new group, no change of one.
    answer = client.post(reverse("admin:auth_group_add"), {"name": "owners", "permissions": every})
    assert answer.status_code == 403 and not Group.objects.filter(name="owners").exists()


def test_token_staff_cannot_take_a_staff_accounts_identity(planted, account):
    boss = account("boss", superuser=True)
    colleague = account("colleague", "runtime.agent:*")
    plain = account("plain", staff=False)
    minter = account("minter", "runtime.apitoken:*")
    client = logged_in(minter)
    for target in (boss, colleague):
        answer = client.post(reverse("admin:runtime_apitoken_add"), {"user": target.pk, "name": "x", "scope": "read_write"})
        assert answer.status_code == 200 and "only a superuser may issue one" in answer.content.decode()
        assert not ApiToken.objects.filter(user=target).exists()
    # Rotating a superuser's token would hand its new secret to the rotator.
    issued = api_token_create(user=boss, name="ci")
    with pytest.raises(PermissionDenied):
        api_token_rotate(token=issued.token, actor=minter)
    answer = client.post(f"/api/tokens/{issued.token.pk}/rotate/")
    assert answer.status_code == 403
    answer = client.post(reverse("admin:runtime_apitoken_changelist"), {"action": "rotate_tokens", "_selected_action": [issued.token.pk]}, follow=True)
    assert "Not rotated" in answer.content.decode()
    assert ApiToken.objects.filter(user=boss, revoked_at__isnull=True).count() == 1
    # Their own, and an account without console rights: theirs to issue.
    assert client.post(reverse("admin:runtime_apitoken_add"), {"user": plain.pk, "name": "p", "scope": "read_write"}).status_code == 302
    assert api_token_create(user=minter, created_by=minter).secret
