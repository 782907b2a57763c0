"""Agents and models are validated, and the console never shows a key."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.models import Agent, ModelConfig
from tests.support.rules import rules, summary_rule

pytestmark = pytest.mark.django_db


def test_model_validation_names_the_field():
    remote = ModelConfig(name="x", provider_kind="openai-compatible", model_id="m", context_window=8000, max_output_tokens=9000)
    with pytest.raises(ValidationError) as failure:
        remote.full_clean()
    errors = failure.value.message_dict
    assert set(errors) >= {"base_url", "api_key_env", "max_output_tokens"}
    bad_name = ModelConfig(name="Bad Name!", provider_kind="scripted", model_id="m", api_key_env="1NOPE")
    with pytest.raises(ValidationError) as failure:
        bad_name.full_clean()
    assert set(failure.value.message_dict) >= {"name", "api_key_env"}


def test_agent_validation_checks_policies():
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="m", context_window=10000)
    agent = Agent(
        name="a",
        model=model,
        tool_policy={"enabled": ["no-such-tool"]},
        skill_policy={"allowed": 7},
        workspace_roots="not a list",
        cwd="relative/path",
        compaction_reserve_tokens=20000,
    )
    with pytest.raises(ValidationError) as failure:
        agent.full_clean()
    errors = failure.value.message_dict
    assert set(errors) >= {"tool_policy", "skill_policy", "workspace_roots", "cwd", "compaction_reserve_tokens"}
    assert "no-such-tool" in " ".join(errors["tool_policy"])


def test_admin_shows_whether_a_key_is_set_never_its_value(client, staff, monkeypatch):
    monkeypatch.setenv("TEST_PROVIDER_KEY_VAR", "sk-live-canary-123")
    model = ModelConfig.objects.create(name="remote", provider_kind="openai", model_id="gpt", api_key_env="TEST_PROVIDER_KEY_VAR")
    ModelConfig.objects.create(name="unset", provider_kind="openai", model_id="gpt", api_key_env="TEST_UNSET_VAR")
    client.force_login(staff)
    listing = client.get("/admin/runtime/modelconfig/").content.decode()
    assert "TEST_PROVIDER_KEY_VAR is set" in listing and "TEST_UNSET_VAR is NOT set" in listing
    detail = client.get(f"/admin/runtime/modelconfig/{model.pk}/change/").content.decode()
    assert "sk-live-canary-123" not in listing + detail


def test_agent_admin_shows_the_effective_tools(client, staff):
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="m")
    agent = Agent.objects.create(name="a", model=model, tool_policy={"disabled": ["bash"]})
    client.force_login(staff)
    page = client.get(f"/admin/runtime/agent/{agent.pk}/change/").content.decode()
    assert "✗ bash — agent_policy: listed in the agent&#x27;s disabled tools" in page
    assert "✓ read" in page


def test_agent_admin_shows_the_effective_skills_and_the_system_prompt(client, staff, settings, tmp_path):
    from skills_registry.services import skills_sync
    from tests.support.skills import write_skill

    workspace = tmp_path / "skills"
    write_skill(workspace, "lint", description="Checks the code style.")
    write_skill(workspace, "deploy", description="Ships it.")
    settings.NETA_SKILLS_DIRS = [str(workspace)]
    settings.NETA_SKILLS_PROJECT_DIR = str(tmp_path / "no-project")
    settings.NETA_SKILLS_HOME = str(tmp_path / "no-home")
    skills_sync()
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="m")
    agent = Agent.objects.create(
        name="a", model=model, system_prompt="You review pull requests.", skill_policy={"allowed": ["lint"]},
        cwd=str(tmp_path / "work"),
    )
    client.force_login(staff)
    page = client.get(f"/admin/runtime/agent/{agent.pk}/change/").content.decode()
    assert "✓ lint (workspace, active)" in page and "✗ deploy (workspace, active)" in page
    prompt = page[page.index("You review pull requests."):]
    assert "Checks the code style." in prompt and "Ships it." not in prompt  # the skill index lists only what is allowed
    assert str(tmp_path / "work") in prompt  # the cwd line
    Agent.objects.filter(pk=agent.pk).update(skill_policy={"allowed": 7})
    page = client.get(f"/admin/runtime/agent/{agent.pk}/change/").content.decode()
    assert "invalid skill policy" in page


@pytest.mark.django_db(transaction=True)
def test_session_compact_and_switch_commands(driver_for):
    driver = driver_for(rules(summary_rule("## Goal\nCommand summary.")))
    driver.prompt("one")
    driver.prompt("two")
    out = io.StringIO()
    call_command("session_compact", driver.session_id, "--instructions", "be brief", stdout=out)
    assert out.getvalue().startswith("compaction ")
    with pytest.raises(CommandError, match="Already compacted"):
        call_command("session_compact", driver.session_id, stdout=io.StringIO())
    from sessions_tree.providers import get_provider

    first_user = [e for e in get_provider("file").list_entries(driver.session_id) if e.get("message", {}).get("role") == "user"][0]
    out = io.StringIO()
    call_command("session_switch", driver.session_id, first_user["id"], stdout=out)
    assert "text to edit:\none" in out.getvalue()
    out = io.StringIO()
    call_command("session_switch", driver.session_id, "@root", stdout=out)
    assert "leaf: (root)" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("session_switch", driver.session_id, "nope1234", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("session_compact", "no-such-session", stdout=io.StringIO())
