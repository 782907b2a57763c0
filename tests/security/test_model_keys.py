"""Where a model's key goes: no staff role below superuser sends a server secret or another
model's key to a URL of its choosing, through the console, the API or a stored row.

Each test points a configuration at a canary HTTP server on loopback and then makes the
model call (the console's *Test connection*, the same path as a run's): the canary counts
what it received."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from runtime.agents import keys
from runtime.agents.connection import model_test_connection
from runtime.agents.services import model_config_create, model_config_update
from runtime.models import ModelConfig

from .security_support import PLANTED, SECRET, logged_in

pytestmark = pytest.mark.django_db

MODEL_STAFF = ("runtime.modelconfig:*",)
KEY_STAFF = ("runtime.modelconfig:*", "runtime.direct_model_keys")


def add_form(**overrides):
    data = {
        "name": "evil", "display_name": "", "provider_kind": "openai", "provider_name": "", "model_id": "gpt",
        "base_url": "", "api_key_env": "", "context_window": 100000, "max_output_tokens": 8192, "supports_tools": "on",
        "price_input": 0, "price_output": 0, "price_cache_read": 0, "price_cache_write": 0, "options": "{}", "enabled": "on",
    }  # fmt: skip
    return {**data, **overrides}


def test_model_staff_cannot_name_a_key_or_an_endpoint_in_the_console(planted, account, canary):
    client = logged_in(account("modeller", *MODEL_STAFF))
    page = client.get(reverse("admin:runtime_modelconfig_add")).content.decode()
    assert 'name="api_key_env"' not in page and 'name="base_url"' not in page  # shown read-only, not editable
    answer = client.post(reverse("admin:runtime_modelconfig_add"), add_form(api_key_env="NETA_SECRET_KEY", base_url=canary.url))
    assert answer.status_code == 200 and "name the environment variable that holds the API key" in answer.content.decode()
    assert not ModelConfig.objects.filter(name="evil").exists()
    claude = ModelConfig.objects.get(name="claude")
    answer = client.post(
        reverse("admin:runtime_modelconfig_change", args=[claude.pk]),
        add_form(name="claude", provider_kind="openai", base_url=canary.url, api_key_env="ANTHROPIC_API_KEY", model_id="changed"),
    )
    claude.refresh_from_db()
    assert (claude.provider_kind, claude.base_url, claude.model_id) == ("anthropic", "", "changed")  # the rest was saved
    model_test_connection(model=claude)
    assert canary.requests == []


@pytest.mark.parametrize(
    "change",
    [{"apiKeyEnv": "NETA_SECRET_KEY"}, {"baseUrl": "http://127.0.0.1:9/v1"}, {"providerKind": "openai"}, {"apiKeyEnv": "OTHER_KEY"}],
    ids=["key", "endpoint", "provider", "another-key"],
)
def test_model_staff_cannot_direct_a_key_over_the_api(planted, account, change):
    client = logged_in(account("modeller", *MODEL_STAFF))
    answer = client.patch("/api/models/claude/", json.dumps(change), content_type="application/json")
    assert answer.status_code == 403, answer.content
    assert "Can direct API keys" in answer.json()["error"]["message"]
    claude = ModelConfig.objects.get(name="claude")
    assert (claude.provider_kind, claude.base_url, claude.api_key_env) == ("anthropic", "", "ANTHROPIC_API_KEY")
    # What does not direct a key stays theirs to change.
    assert client.patch("/api/models/claude/", json.dumps({"priceInput": 3}), content_type="application/json").status_code == 200


@pytest.mark.parametrize("name", ["NETA_SECRET_KEY", "NETA_DATABASE_URL", "DATABASE_URL_FILE", "DJANGO_SECRET_KEY", "MY_DB_PASSWORD", "REDIS_URL"])
def test_no_one_names_a_server_secret_as_a_key_not_even_a_superuser(planted, account, canary, name):
    for user in (account("keyholder", *KEY_STAFF), account("root", superuser=True)):
        client = logged_in(user)
        answer = client.post(
            reverse("admin:runtime_modelconfig_add"), add_form(name=f"evil-{user.username}", api_key_env=name, base_url=canary.url)
        )
        assert "no configuration may read it" in answer.content.decode()
        answer = client.patch("/api/models/claude/", json.dumps({"apiKeyEnv": name}), content_type="application/json")
        assert answer.status_code == 400 and "no configuration may read it" in json.dumps(answer.json())
    assert not ModelConfig.objects.filter(name__startswith="evil").exists()
    assert canary.requests == []


def test_an_endpoint_set_without_superuser_rights_passes_the_web_guard(planted, account, canary):
    keyholder = account("keyholder", *KEY_STAFF)
    with pytest.raises(ValidationError, match="NETA_WEB_FETCH_ALLOW"):
        model_config_create(actor=keyholder, fields={"name": "evil", "provider_kind": "openai", "model_id": "m", "base_url": canary.url, "api_key_env": "EVIL_KEY"})
    for url in ("http://169.254.169.254/latest", "http://10.0.0.5/v1", "http://[::1]:6379/"):
        answer = logged_in(keyholder).patch("/api/models/claude/", json.dumps({"baseUrl": url}), content_type="application/json")
        assert answer.status_code == 400, (url, answer.content)
    # A superuser may point a model at a local server (a local vLLM is a common deployment).
    root = account("root", superuser=True)
    local = model_config_create(actor=root, fields={"name": "local", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url + "/v1", "api_key_env": "LOCAL_KEY"})
    assert local.base_url.startswith(canary.url)


def test_a_key_goes_to_one_endpoint_only(planted, account, canary):
    """The Anthropic key sent to an openai-kind model pointed at the attacker's server: refused
    when saved, and refused when used if such a row was stored earlier."""
    root = account("root", superuser=True)
    with pytest.raises(ValidationError, match="already goes to another endpoint"):
        model_config_create(actor=root, fields={"name": "evil", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url, "api_key_env": "ANTHROPIC_API_KEY"})
    # A row written before the rule (or around the services).
    evil = ModelConfig.objects.create(name="evil", provider_kind="openai-compatible", model_id="m", base_url=canary.url, api_key_env="ANTHROPIC_API_KEY")
    keys.forget()
    result = model_test_connection(model=evil)
    assert not result.ok and "a key is sent to one endpoint only" in result.error
    assert canary.requests == []
    # Pointing both at one endpoint is the way out (then the key goes there, chosen on purpose).
    with pytest.raises(PermissionDenied):
        model_config_update(model_id=evil.pk, actor=account("modeller", *MODEL_STAFF), changes={"base_url": "https://api.anthropic.com"})


def test_a_stored_secret_key_variable_is_not_sent(planted, canary):
    """A row naming NETA_SECRET_KEY, stored before the rule: the call is refused, nothing is sent."""
    evil = ModelConfig.objects.create(name="evil", provider_kind="openai-compatible", model_id="m", base_url=canary.url, api_key_env="NETA_SECRET_KEY")
    result = model_test_connection(model=evil)
    assert not result.ok and "no configuration may read it" in result.error
    assert canary.requests == [] and not any(canary.received(s) for s in PLANTED)


def test_a_model_without_base_url_never_follows_the_environments_base_url(planted, monkeypatch, canary):
    monkeypatch.setenv("OPENAI_BASE_URL", canary.url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", canary.url)
    monkeypatch.setenv("OPENAI_API_KEY", "canary-openai-key-7f3a")
    gpt = ModelConfig.objects.create(name="gpt", provider_kind="openai", model_id="gpt-x", api_key_env="OPENAI_API_KEY")
    keys.forget()
    for model in (gpt, ModelConfig.objects.get(name="claude")):
        model_test_connection(model=model, timeout=3)  # to the provider's own API: unreachable here
    assert canary.requests == []


def test_a_redirect_does_not_carry_the_key_elsewhere(planted, monkeypatch, account, canary, second_canary):
    monkeypatch.setenv("LOCAL_KEY", "canary-local-key-7f3a")
    canary.redirect_to = second_canary.url
    local = model_config_create(
        actor=account("root", superuser=True),
        fields={"name": "local", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url + "/v1", "api_key_env": "LOCAL_KEY"},
    )
    result = model_test_connection(model=local, timeout=5)
    assert not result.ok
    assert canary.received("canary-local-key-7f3a") == 1  # its own endpoint got it
    assert second_canary.requests == []  # the redirect was not followed


def test_openai_organization_goes_to_openai_only(planted, monkeypatch, account, canary):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-canary-7f3a")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-canary-7f3a")
    monkeypatch.setenv("DEEP_KEY", "canary-deep-key")
    deep = model_config_create(
        actor=account("root", superuser=True),
        fields={"name": "deep", "provider_kind": "openai-compatible", "model_id": "m", "base_url": canary.url + "/v1", "api_key_env": "DEEP_KEY"},
    )
    model_test_connection(model=deep, timeout=5)
    assert len(canary.requests) == 1
    assert canary.received("org-canary-7f3a") == 0 and canary.received("proj-canary-7f3a") == 0


def test_scripted_rules_come_only_from_the_rules_folders_and_errors_never_show_a_file(planted, account, tmp_path, settings):
    client = logged_in(account("modeller", *MODEL_STAFF))
    secret_file = tmp_path / "secret.yaml"
    secret_file.write_text("version: 1\ndefault: {reply: [{text: 'root:$6$canaryhash:19000'}]}\n")
    for path in ("/etc/shadow", str(secret_file), "../../../../etc/passwd", str(settings.BASE_DIR / "var" / "secret_key")):
        answer = client.post(reverse("admin:runtime_modelconfig_add"), add_form(name="s", provider_kind="scripted", options=json.dumps({"rules": path})))
        text = answer.content.decode()
        assert "is not a rules file" in text, path
        assert "canaryhash" not in text and "root:" not in text
    assert not ModelConfig.objects.filter(name="s").exists()
    # The configured folder is where rules come from.
    settings.NETA_SCRIPTED_RULES_DIR = tmp_path
    answer = client.post(reverse("admin:runtime_modelconfig_add"), add_form(name="s", provider_kind="scripted", options=json.dumps({"rules": "secret.yaml"})))
    assert answer.status_code == 302 and ModelConfig.objects.filter(name="s").exists()
    # A row stored before the rule is refused when called, without the content.
    settings.NETA_SCRIPTED_RULES_DIR = tmp_path / "elsewhere"
    result = model_test_connection(model=ModelConfig.objects.get(name="s"))
    assert not result.ok and "is not a rules file" in result.error and "canaryhash" not in result.error


def test_a_superuser_directs_keys_through_the_same_services(planted, account, canary):
    """The rules are not only in the form: the service refuses the same things, with the actor."""
    modeller = account("modeller", *MODEL_STAFF)
    claude = ModelConfig.objects.get(name="claude")
    with pytest.raises(PermissionDenied):
        model_config_update(model_id=claude.pk, actor=modeller, changes={"base_url": canary.url})
    with pytest.raises(PermissionDenied):
        model_config_create(actor=modeller, fields={"name": "x", "provider_kind": "anthropic", "model_id": "m", "api_key_env": "X_KEY"})
    scripted = model_config_create(actor=modeller, fields={"name": "y", "provider_kind": "scripted", "model_id": "m"})
    assert scripted.pk and SECRET not in json.dumps(scripted.options)
