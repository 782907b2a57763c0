"""An agent's fallback models as configuration: validated the same way in the model, the
console's agent page and ``PATCH /api/agents/{name}/`` (existing, enabled models, none
twice, not the agent's own), shown in both; and the thinking clamp's rules per model kind."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from audit.models import AuditEntry
from runtime.llm import ModelSpec
from runtime.llm.thinking import accepted_levels, clamp_thinking
from runtime.models import Agent, ModelConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "ws"
    own = ModelConfig.objects.create(name="own", provider_kind="scripted", model_id="s")
    ModelConfig.objects.create(name="backup", provider_kind="scripted", model_id="b")
    ModelConfig.objects.create(name="second", provider_kind="scripted", model_id="c")
    ModelConfig.objects.create(name="off", provider_kind="scripted", model_id="d", enabled=False)
    return Agent.objects.create(name="helper", model=own)


BAD = [
    (["nope"], "'nope' is not a model (enabled models: backup, second)"),
    (["off"], "'off' is disabled"),
    (["backup", "backup"], "'backup' is listed twice (each model is tried at most once)"),
    (["own"], "'own' is the agent's own model (a fallback must be another model)"),
    ("backup", "must be a list of model names, got 'backup'"),
    ([1], "must be a list of model names, got [1]"),
]


@pytest.mark.parametrize(("value", "message"), BAD)
def test_the_model_refuses_a_bad_list(agent, value, message):
    agent.fallback_models = value
    with pytest.raises(ValidationError) as caught:
        agent.full_clean()
    assert caught.value.message_dict["fallback_models"] == [message]


def test_a_good_list_keeps_its_order(agent):
    agent.fallback_models = ["second", "backup"]
    agent.full_clean()
    agent.save()
    assert Agent.objects.get(pk=agent.pk).fallback_models == ["second", "backup"]


def test_a_fallback_disabled_since_does_not_block_other_edits(agent, staff):
    from runtime.agents.services import agent_update

    agent_update(agent_id=agent.pk, actor=staff, changes={"fallback_models": ["backup", "second"]})
    ModelConfig.objects.filter(name="backup").update(enabled=False)
    ModelConfig.objects.filter(name="second").delete()
    saved = agent_update(agent_id=agent.pk, actor=staff, changes={"description": "still editable"})
    assert saved.description == "still editable" and saved.fallback_models == ["backup", "second"]
    with pytest.raises(ValidationError) as caught:  # a newly named disabled model is refused
        agent_update(agent_id=agent.pk, actor=staff, changes={"fallback_models": ["backup", "second", "off"]})
    assert caught.value.message_dict["fallback_models"] == ["'off' is disabled"]


def test_the_api_shows_and_changes_the_list(client, staff, agent, owner):
    client.force_login(staff)
    assert client.get("/api/agents/helper/").json()["fallbackModels"] == []
    answer = client.patch("/api/agents/helper/", {"fallbackModels": ["backup", "nope", "own"]}, content_type="application/json")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"]["fallbackModels"] == [
        "'nope' is not a model (enabled models: backup, second)",
        "'own' is the agent's own model (a fallback must be another model)",
    ]
    assert Agent.objects.get(pk=agent.pk).fallback_models == []  # nothing saved
    answer = client.patch("/api/agents/helper/", {"fallbackModels": ["second", "backup"]}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["fallbackModels"] == ["second", "backup"]
    assert client.get("/api/agents/").json()["results"][0]["fallbackModels"] == ["second", "backup"]
    audit = AuditEntry.objects.filter(action="agent.change").latest("id")
    assert audit.after == {"fallback_models": ["second", "backup"]}
    assert client.patch("/api/agents/helper/", {"name": "x"}, content_type="application/json").status_code == 400
    client.force_login(owner)  # not staff: may read the agent, not change it
    answer = client.patch("/api/agents/helper/", {"fallbackModels": []}, content_type="application/json")
    assert answer.status_code == 403
    assert Agent.objects.get(pk=agent.pk).fallback_models == ["second", "backup"]



def test_a_null_for_a_field_that_cannot_hold_one_is_400_not_a_crash(client, staff, agent):
    """full_clean lets None through a blank text field; the save would fail with a 500."""
    client.force_login(staff)
    before = Agent.objects.get(pk=agent.pk).system_prompt
    for path, body in (("/api/agents/helper/", {"systemPrompt": None, "description": "x"}), ("/api/models/backup/", {"baseUrl": None})):
        answer = client.patch(path, body, content_type="application/json")
        assert answer.status_code == 400, answer.content
        error = answer.json()["error"]
        assert error["code"] == "invalid" and list(error["fields"].values()) == [["may not be null"]]
    agent.refresh_from_db()
    assert agent.system_prompt == before and agent.description != "x"  # nothing saved

def form_data(page) -> dict:
    """What the browser posts back: every field of the agent form as rendered."""
    form = page.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif value is not None:
            data[name] = field.prepare_value(value) if name == "fallback_models" else value
    return data


def test_the_console_edits_the_list_and_names_what_is_wrong(client, staff, agent):
    client.force_login(staff)
    url = reverse("admin:runtime_agent_change", args=[agent.pk])
    page = client.get(url)
    assert "Model calls and compaction" in page.content.decode() and 'name="fallback_models"' in page.content.decode()
    data = form_data(page)
    answer = client.post(url, {**data, "fallback_models": "backup, off, backup"})
    assert answer.status_code == 200  # the form again, with the errors
    html = answer.content.decode()
    assert "&#x27;off&#x27; is disabled" in html and "&#x27;backup&#x27; is listed twice" in html
    assert Agent.objects.get(pk=agent.pk).fallback_models == []
    answer = client.post(url, {**data, "fallback_models": "second, backup"})
    assert answer.status_code == 302
    assert Agent.objects.get(pk=agent.pk).fallback_models == ["second", "backup"]
    assert 'value="second, backup"' in client.get(url).content.decode()


def test_the_agent_page_warns_about_a_clamp_and_unusable_fallbacks(client, staff, agent, monkeypatch):
    ModelConfig.objects.create(name="remote", provider_kind="openai", model_id="gpt", api_key_env="NETA_FALLBACK_UNSET")
    monkeypatch.delenv("NETA_FALLBACK_UNSET", raising=False)
    Agent.objects.filter(pk=agent.pk).update(fallback_models=["backup", "remote"], thinking_level="high")
    ModelConfig.objects.filter(name="backup").update(enabled=False)  # disabled after it was chosen
    ModelConfig.objects.filter(name="own").update(supports_thinking=False)
    client.force_login(staff)
    html = client.get(reverse("admin:runtime_agent_change", args=[agent.pk])).content.decode().replace("&#x27;", "'")
    assert "the thinking level is clamped for runs: thinking high → off: model own does not think" in html
    assert "the model 'backup' is disabled: failover skips it (a fallback)" in html
    assert "the model 'remote' needs NETA_FALLBACK_UNSET, which is not set in this process (a fallback)" in html


# --------------------------------------------------------------------------- thinking levels per model


def spec(kind="openai", model_id="m", **fields) -> ModelSpec:
    return ModelSpec(provider_kind=kind, model_id=model_id, provider_name=fields.pop("provider_name", kind), supports_thinking=True, **fields)


def test_the_levels_each_kind_accepts():
    assert accepted_levels(ModelSpec("openai", "m", "openai")) == ("off",)  # supports_thinking false
    assert accepted_levels(spec("openai")) == ("off", "minimal", "low", "medium", "high")
    assert accepted_levels(spec("openai-responses")) == ("off", "minimal", "low", "medium", "high")
    assert accepted_levels(spec("anthropic", "claude-sonnet-4-5")) == ("off", "minimal", "low", "medium", "high")
    assert accepted_levels(spec("anthropic", "claude-opus-4-6")) == ("off", "low", "medium", "high")  # adaptive: efforts
    assert accepted_levels(spec("openai-compatible", provider_name="deepseek")) == ("off", "minimal", "low", "medium", "high", "xhigh")
    assert accepted_levels(spec("scripted")) == ("off", "minimal", "low", "medium", "high", "xhigh")
    assert accepted_levels(spec(options={"thinking_levels": ["medium", "high"]})) == ("off", "medium", "high")


@pytest.mark.parametrize(
    ("levels", "requested", "sent"),
    [
        (None, "xhigh", "high"),  # down to the nearest accepted level
        (None, "medium", "medium"),
        (["low", "high"], "medium", "low"),
        (["medium", "high"], "minimal", "medium"),  # thinking was asked for: up to the lowest one
        (["medium", "high"], "off", "off"),
        (None, "bogus", "off"),
    ],
)
def test_the_clamp(levels, requested, sent):
    options = {"thinking_levels": levels} if levels else {}
    clamp = clamp_thinking(spec(options=options), requested)
    assert clamp.level == sent
    assert clamp.changed == (sent != requested and requested != "bogus")


def test_a_model_row_refuses_a_bad_level_list():
    model = ModelConfig(name="m", provider_kind="openai", model_id="x", api_key_env="K", options={"thinking_levels": ["huge"]})
    with pytest.raises(ValidationError) as caught:
        model.full_clean()
    assert "thinking_levels has unknown thinking level 'huge'" in " ".join(caught.value.message_dict["options"])
