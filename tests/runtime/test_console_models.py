"""The console's model pages: options checked on save, key status, agents using it, Test connection."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from runtime.models import Agent, ModelConfig
from tests.support.builders import model_form as form
from tests.support.wire_servers import Reply, Status, serve

pytestmark = pytest.mark.django_db
openai_server, _clean = serve("openai", "openai_server")


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("openai", {"max_retries": "lots"}, "max_retries must be a whole number, got 'lots'"),
        ("openai", {"timeout": 0}, "timeout must be > 0"),
        ("anthropic", {"cache": "forever"}, "cache must be one of none, short, long"),
        ("openai", {"cache": "short"}, "unknown option 'cache' for a openai model"),
        ("scripted", {"rules": "no/such/rules.yaml"}, "is not a rules file"),
        ("scripted", {"rules": {"version": 1, "rules": []}}, "give at least one rule or a default"),
    ],
)
def test_options_are_checked_against_the_schema(kind, options, message):
    model = ModelConfig(name="x", provider_kind=kind, model_id="m", api_key_env="SOME_KEY", options=options)
    with pytest.raises(ValidationError) as failure:
        model.full_clean()
    assert message in " ".join(failure.value.message_dict["options"])


def test_good_options_pass():
    ModelConfig(name="x", provider_kind="openai", model_id="m", api_key_env="K", options={"max_retries": 2, "timeout": 30}).full_clean()
    ModelConfig(name="y", provider_kind="scripted", model_id="m", options={"rules": "runtime/llm/scripted_demo.yaml", "delay_ms": 0}).full_clean()


def test_the_form_refuses_bad_options_with_the_message_and_stores_nothing(client, staff):
    client.force_login(staff)
    answer = client.post(reverse("admin:runtime_modelconfig_add"), form(options='{"rules": "missing.yaml"}'))
    assert answer.status_code == 200
    assert "missing.yaml" in answer.content.decode()
    assert not ModelConfig.objects.exists()


def test_list_and_page_show_key_status_agents_and_never_the_key(client, staff, monkeypatch):
    monkeypatch.setenv("CONSOLE_TEST_KEY", "sk-canary-console-42")
    model = ModelConfig.objects.create(name="remote", provider_kind="openai", model_id="gpt", api_key_env="CONSOLE_TEST_KEY", supports_images=True)
    Agent.objects.create(name="uses-it", model=model)
    client.force_login(staff)
    listing = client.get(reverse("admin:runtime_modelconfig_changelist")).content.decode()
    page = client.get(reverse("admin:runtime_modelconfig_change", args=[model.pk])).content.decode()
    for html in (listing, page):
        assert "CONSOLE_TEST_KEY is set" in html and "sk-canary-console-42" not in html
    assert "tools, images" in listing
    assert "uses-it" in page and "max_retries" in page  # agents using it; the options this provider reads


def test_test_connection_scripted_answers_offline(client, staff):
    model = ModelConfig.objects.create(name="demo", provider_kind="scripted", model_id="demo", enabled=False)
    client.force_login(staff)
    answer = client.post(reverse("admin:runtime_modelconfig_test", args=[model.pk]), follow=True)
    test = answer.context["connection_test"]
    assert test["ok"] is True and "scripted demo model" in test["text"] and test["totalMs"] >= 0
    assert 'id="connection-test"' in answer.content.decode()
    assert client.get(reverse("admin:runtime_modelconfig_test", args=[model.pk])).status_code == 405


def test_test_connection_goes_through_the_real_client(client, staff, openai_server, monkeypatch):
    monkeypatch.setenv("CONSOLE_WIRE_KEY", "sk-wire")
    model = ModelConfig.objects.create(
        name="wire", provider_kind="openai-compatible", model_id="wire-model", base_url=openai_server.base_url, api_key_env="CONSOLE_WIRE_KEY",
    )
    openai_server.script(Reply(content=[{"type": "text", "text": "Connected fine."}]), Status(401, "invalid api key", error_type="invalid_request_error"))
    client.force_login(staff)
    first = client.post(reverse("admin:runtime_modelconfig_test", args=[model.pk]), follow=True).context["connection_test"]
    assert first["ok"] is True and first["text"] == "Connected fine." and first["firstEventMs"] is not None
    assert openai_server.requests[0].headers.get("authorization") == "Bearer sk-wire"
    second = client.post(reverse("admin:runtime_modelconfig_test", args=[model.pk]), follow=True).context["connection_test"]
    assert second["ok"] is False and "invalid api key" in second["error"]
    assert len(openai_server.requests) == 2  # no retries

    monkeypatch.delenv("CONSOLE_WIRE_KEY")
    third = client.post(reverse("admin:runtime_modelconfig_test", args=[model.pk]), follow=True).context["connection_test"]
    assert third["ok"] is False and "CONSOLE_WIRE_KEY" in third["error"] and len(openai_server.requests) == 2


def test_the_api_refuses_the_same_options_and_audits_a_change(client, staff, owner):
    from audit.models import AuditEntry
    from runtime.api.tokens import api_token_create

    model = ModelConfig.objects.create(name="remote", provider_kind="openai", model_id="gpt", api_key_env="SOME_KEY", options={"max_retries": 2})
    client.force_login(staff)
    answer = client.patch("/api/models/remote/", {"options": {"max_retries": "lots"}}, content_type="application/json")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "max_retries must be a whole number, got 'lots'" in " ".join(error["fields"]["options"])
    model.refresh_from_db()
    assert model.options == {"max_retries": 2}
    assert client.patch("/api/models/remote/", {"name": "other"}, content_type="application/json").status_code == 400
    answer = client.patch("/api/models/remote/", {"options": {"max_retries": 5}, "contextWindow": 200000}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["contextWindow"] == 200000
    model.refresh_from_db()
    assert model.options == {"max_retries": 5}
    entry = AuditEntry.objects.get(action="model.change")
    assert entry.actor == staff and entry.via == "api" and entry.after == {"options": {"max_retries": 5}, "context_window": 200000}
    client.force_login(owner)
    assert client.patch("/api/models/remote/", {"enabled": False}, content_type="application/json").status_code in (403, 404)
    client.logout()
    token = api_token_create(user=staff, read_only=True).secret
    refused = client.patch("/api/models/remote/", {"enabled": False}, content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert refused.status_code == 403
    model.refresh_from_db()
    assert model.enabled is True


def test_test_connection_needs_the_change_permission(client, django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_modelconfig"))
    model = ModelConfig.objects.create(name="demo", provider_kind="scripted", model_id="demo")
    client.force_login(viewer)
    page = client.get(reverse("admin:runtime_modelconfig_change", args=[model.pk]))
    assert page.status_code == 200 and 'id="test-connection"' not in page.content.decode()
    assert client.post(reverse("admin:runtime_modelconfig_test", args=[model.pk])).status_code == 403


def test_a_console_change_goes_through_the_service_the_api_uses(client, staff, monkeypatch):
    """The model's page saves a change with ``model_config_update``: one ``model.change`` row with
    only the fields that changed, via the console; the name stays (runs name their model)."""
    from audit.models import AuditEntry
    from runtime.agents.services import model_config_update

    model = ModelConfig.objects.create(name="m1", provider_kind="scripted", model_id="s", context_window=100000)
    called = []  # the real service, watched
    monkeypatch.setattr("runtime.admin.models.model_config_update", lambda **kw: called.append(kw) or model_config_update(**kw))
    client.force_login(staff)
    url = reverse("admin:runtime_modelconfig_change", args=[model.pk])
    answer = client.post(url, form(name="renamed", context_window=200000, options='{"delay_ms": 0}'))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    model.refresh_from_db()
    assert model.name == "m1" and model.context_window == 200000 and model.options == {"delay_ms": 0}
    assert [sorted(kw["changes"]) for kw in called] == [["context_window", "options"]]
    entry = AuditEntry.objects.get(action="model.change")
    assert entry.via == "console" and entry.actor == staff
    assert entry.before == {"context_window": 100000, "options": {}} and entry.after == {"context_window": 200000, "options": {"delay_ms": 0}}
    # Nothing changed: no call, no row.
    client.post(url, form(context_window=200000, options='{"delay_ms": 0}'))
    assert AuditEntry.objects.filter(action="model.change").count() == 1
