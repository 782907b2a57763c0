"""ToolConfig governance rows: validation, services, the projection reading them, the admin."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from toolcatalog import services
from toolcatalog.models import ToolConfig
from toolcatalog.projection import resolve_tools
from toolcatalog.selectors import governance_rules, tool_catalog

pytestmark = pytest.mark.django_db


def test_update_creates_and_changes_rows(staff):
    row = services.tool_config_update(actor=staff, name="bash", enabled=False, prompt_hint="Ask first.")
    assert (row.enabled, row.prompt_hint, row.updated_by) == (False, "Ask first.", staff)
    again = services.tool_config_update(actor=staff, name="bash", enabled=True)
    assert again.pk == row.pk and again.enabled and again.prompt_hint == "Ask first."
    assert ToolConfig.objects.count() == 1


def test_rows_are_validated(staff):
    with pytest.raises(ValidationError) as info:
        services.tool_config_update(actor=staff, name="no_such_tool", enabled=False)
    assert "no tool named 'no_such_tool' is registered" in str(info.value)
    with pytest.raises(ValidationError) as info:
        services.tool_config_update(actor=staff, name="grep", worker_routing="somewhere")
    assert "worker_routing" in info.value.message_dict
    with pytest.raises(TypeError, match="unknown ToolConfig fields: colour"):
        services.tool_config_update(actor=staff, name="grep", colour="red")
    assert ToolConfig.objects.count() == 0


def test_sync_creates_one_row_per_registered_tool(staff):
    services.tool_config_update(actor=staff, name="read", enabled=False)
    created = services.tool_config_sync(actor=staff)
    names = set(ToolConfig.objects.values_list("name", flat=True))
    assert {"read", "bash", "edit", "write", "grep", "find", "ls"} <= names
    assert "read" not in {r.name for r in created}
    assert ToolConfig.objects.get(name="read").enabled is False  # existing rows untouched
    assert services.tool_config_sync(actor=staff) == []


def test_projection_reads_governance_in_one_query(staff, django_assert_num_queries):
    services.tool_config_update(actor=staff, name="bash", enabled=False)
    services.tool_config_update(actor=staff, name="grep", label_override="Search", worker_routing="main-process-proxy")
    # The governance rows, and the MCP servers whose tools join the registry (a run that
    # knows the catalog's version reads neither: tests/runtime/test_turn_queries.py).
    with django_assert_num_queries(2):
        projection = resolve_tools({})
    assert projection["bash"].effective is False and projection["bash"].source == "governance"
    assert projection["grep"].label == "Search" and projection["grep"].route == "main-process-proxy"
    assert projection["grep"].route_source == "governance"
    assert governance_rules()["grep"].label == "Search"


def test_catalog_selector_lists_every_tool_with_its_row(staff):
    services.tool_config_update(actor=staff, name="ls", renderer_key="grep")
    catalog = {entry["name"]: entry for entry in tool_catalog()}
    assert catalog["ls"]["governance"]["renderer_key"] == "grep"
    assert catalog["read"]["governance"] is None
    assert catalog["bash"]["manifest"]["requires_shell"] is True


def test_tool_execute_refuses_what_the_projection_blocks(staff, tmp_path):
    services.tool_config_update(actor=staff, name="bash", enabled=False)
    ctx = services.tool_context_build(policy={}, roots=[tmp_path], sandbox="none")
    result = services.tool_execute(name="bash", args={"command": "touch x"}, ctx=ctx, projection=resolve_tools({}))
    assert result.is_error and result.text_output() == (
        "Tool 'bash' is not available: disabled by staff governance (ToolConfig)")
    assert not (tmp_path / "x").exists()
    ok = services.tool_execute(name="ls", args={}, ctx=ctx, projection=resolve_tools({}))
    assert not ok.is_error


def test_context_build_carries_policy_env_and_network(tmp_path):
    ctx = services.tool_context_build(
        policy={"env_passthrough": ["GITHUB_TOKEN"], "network": True}, roots=[tmp_path], extras={"trace": "x"}
    )
    assert ctx.env_passthrough == ("GITHUB_TOKEN",) and ctx.network is True
    assert ctx.extras == {"trace": "x"}
    assert ctx.skill_policy is None and ctx.for_subagent is False
    sub = services.tool_context_build(policy={}, roots=[tmp_path], for_subagent=True)
    assert sub.for_subagent is True


# --- admin -------------------------------------------------------------------------------


def test_admin_changelist_and_sync_for_staff(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(admin)
    page = client.get("/admin/toolcatalog/toolconfig/")
    assert page.status_code == 200 and b"Add rows for all registered tools" in page.content
    response = client.post("/admin/toolcatalog/toolconfig/sync/")
    assert response.status_code == 302
    assert ToolConfig.objects.filter(name="bash").exists()
    row = ToolConfig.objects.get(name="bash")
    change = client.get(f"/admin/toolcatalog/toolconfig/{row.pk}/change/")
    assert change.status_code == 200 and b"requires_shell" in change.content
    response = client.post(
        f"/admin/toolcatalog/toolconfig/{row.pk}/change/",
        {"enabled": "", "label_override": "Shell", "description_override": "", "prompt_hint": "Careful.",
         "allow_in_subagent": "on", "worker_routing": "main-process-proxy", "renderer_key": ""},
    )
    assert response.status_code == 302, response.content[:500]
    row.refresh_from_db()
    assert (row.enabled, row.label_override, row.worker_routing, row.updated_by) == (
        False, "Shell", "main-process-proxy", admin)


def test_admin_add_form_offers_only_registered_tools(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(admin)
    form = {"enabled": "on", "allow_in_subagent": "on", "worker_routing": "", "label_override": "",
            "description_override": "", "prompt_hint": "", "renderer_key": ""}
    bad = client.post("/admin/toolcatalog/toolconfig/add/", {**form, "name": "made_up"})
    assert bad.status_code == 200 and b"Select a valid choice" in bad.content
    good = client.post("/admin/toolcatalog/toolconfig/add/", {**form, "name": "grep"})
    assert good.status_code == 302
    assert ToolConfig.objects.get(name="grep").updated_by == admin


def test_admin_is_closed_to_outsiders(client, outsider):
    client.force_login(outsider)
    assert client.get("/admin/toolcatalog/toolconfig/").status_code == 302
    assert client.post("/admin/toolcatalog/toolconfig/sync/").status_code == 302
    assert ToolConfig.objects.count() == 0


@pytest.fixture
def skill_rows():
    from django.utils import timezone

    from skills_registry.models import SkillResource

    return [
        SkillResource.objects.create(
            path_key="k-alpha", name="alpha", description="A skill.", scope="project", fingerprint="f",
            entry_file="/x/alpha/SKILL.md", base_dir="/x/alpha", status=SkillResource.Status.ACTIVE, last_seen_at=timezone.now(),
        )
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_catalog_a_process_keeps_follows_every_change(staff, skill_rows):
    """A run knows the catalog's version from its claim; at a version the process read
    already, the governance rows and the skills cost no query, and every change (a
    governance row saved, a skill row saved or bulk-switched) is a new version."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from skills_registry.policy import SkillPolicy
    from skills_registry.selectors import skills_visible
    from toolcatalog import catalog_version
    from toolcatalog.models import CatalogVersion

    def version() -> int:
        return CatalogVersion.objects.annotate(v=catalog_version.current_version()).values_list("v", flat=True).first() or 0

    def read() -> tuple[bool, list[str]]:
        with catalog_version.at_version(version()):
            return governance_rules()["ls"].enabled, [s.name for s in skills_visible(policy=SkillPolicy.from_dict({}))]

    services.tool_config_update(actor=staff, name="ls", enabled=True)
    assert read() == (True, ["alpha"])
    at = version()
    with CaptureQueriesContext(connection) as captured, catalog_version.at_version(at):
        governance_rules()
        skills_visible(policy=SkillPolicy.from_dict({}))
    assert captured.captured_queries == []  # kept at this version
    services.tool_config_update(actor=staff, name="ls", enabled=False)
    assert version() == at + 1 and read() == (False, ["alpha"])
    from skills_registry.services import skills_set_disabled

    skills_set_disabled(skills=list(skill_rows), disabled=True, actor=staff)  # a bulk UPDATE
    assert read() == (False, [])
