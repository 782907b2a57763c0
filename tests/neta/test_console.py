"""The console's own pages: the overview and its health, the health API, the tools catalog."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db import DatabaseError
from django.urls import reverse
from django.utils import timezone

from runtime.models import Agent, AgentRun, ModelConfig, ProcessBeat
from runtime.runs import health
from runtime.runs.reaper import reap_stale_runs
from toolcatalog.models import ToolConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent():
    model = ModelConfig.objects.create(name="cheap", provider_kind="scripted", model_id="s", context_window=100000)
    return Agent.objects.create(name="helper", model=model)


def test_health_api_is_liveness_for_anyone_and_detail_for_staff(client, staff, owner):
    answer = client.get("/api/health/")
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}
    client.force_login(owner)
    assert client.get("/api/health/").json() == {"status": "ok"}  # not staff: no detail
    client.force_login(staff)
    report = client.get("/api/health/").json()
    assert set(report) >= {"status", "database", "channelLayer", "celery", "sandbox", "reaper"}
    assert report["database"]["ok"] is True
    assert report["sandbox"]["mode"] in ("bwrap", "none")
    assert report["reaper"] == {**report["reaper"], "ok": False, "lastPass": None}  # no pass recorded yet
    assert report["status"] == "degraded"


def test_health_api_answers_503_when_the_database_is_down(client, monkeypatch):
    def broken(*args, **kwargs):
        raise DatabaseError("server has gone away")

    monkeypatch.setattr("django.db.backends.utils.CursorWrapper.execute", broken)
    answer = client.get("/api/health/")
    assert answer.status_code == 503 and answer.json() == {"status": "down"}


def test_a_whole_reaper_round_is_recorded_and_shown(client, staff):
    reap_stale_runs(start=False)
    reap_stale_runs(session_id="some-session", start=False)  # one session's round: not a pass
    beat = ProcessBeat.objects.get()
    assert beat.duty == "reaper" and beat.changed == 0 and beat.error == ""
    status = health.reaper_status()
    assert status["ok"] is True and status["lastPass"] == beat.at.isoformat()
    client.force_login(staff)
    page = client.get(reverse("admin:index")).content.decode()
    assert 'id="health"' in page and beat.host in page


def test_celery_queues_are_listed_with_a_missing_worker_named(settings):
    settings.NETA_TASK_BACKEND = "celery"
    settings.CELERY_TASK_DEFAULT_QUEUE = "neta-console-test-turns"  # no worker consumes these
    settings.NETA_SUBAGENT_QUEUE = "neta-console-test-subagents"
    status = health.celery_status(timeout=0.3)
    assert set(status["queues"]) >= {"neta-console-test-turns", "neta-console-test-subagents"}
    assert status["queues"]["neta-console-test-turns"] == []
    assert status["ok"] is False and "neta-console-test-turns" in status["detail"]


def test_overview_counts_runs_usage_and_failures(client, staff, owner, agent):
    now = timezone.now()
    AgentRun.objects.create(session_id="s1", agent=agent, user=owner, status="completed", input_tokens=100, output_tokens=20, cost=Decimal("0.5"))
    AgentRun.objects.create(session_id="s1", agent=agent, user=owner, status="failed", error="model said no: 429 rate limited")
    AgentRun.objects.create(session_id="s2", agent=agent, status="running")
    old = AgentRun.objects.create(session_id="s3", agent=agent, status="completed")
    AgentRun.objects.filter(pk=old.pk).update(created_at=now - dt.timedelta(days=3))
    client.force_login(staff)
    answer = client.get(reverse("admin:index"))
    context = answer.context
    assert context["runs_24h"]["completed"] == 1 and context["runs_24h"]["failed"] == 1 and context["runs_24h"]["running"] == 1
    assert [r.session_id for r in context["active_runs"]] == ["s2"]
    tables = {by: rows for by, _, rows in context["usage_tables"]}
    assert [(r["key"], r["runs"], r["input_tokens"]) for r in tables["agent"]] == [("helper", 4, 100)]  # the week, top few
    assert {r["key"] for r in tables["model"]} == {"cheap"}
    assert {r["key"] for r in tables["user"]} == {"owner", "(no user)"}
    assert context["usage_totals"]["runs"] == 4 and context["usage_totals"]["cost"] == "0.500000"
    page = answer.content.decode()
    assert 'href="/admin/console/usage/?from=' in page  # every row: the usage page
    assert "429 rate limited" in page and 'id="failing-runs"' in page


def test_tools_page_lists_the_registry_without_rows_and_says_why_a_subagent_lacks_a_tool(client, staff, agent):
    assert not ToolConfig.objects.exists()
    client.force_login(staff)
    page = client.get(reverse("admin:console_tools")).content.decode()
    for name in ("read", "write", "bash", "ls"):
        assert f'data-tool="{name}"' in page
    answer = client.post(
        reverse("admin:console_tool", args=["bash"]),
        {"enabled": "on", "worker_routing": "", "renderer_key": ""},  # allow_in_subagent unchecked
    )
    assert answer.status_code == 302
    row = ToolConfig.objects.get(name="bash")
    assert row.allow_in_subagent is False and row.updated_by == staff
    detail = client.get(reverse("admin:console_tool", args=["bash"]))
    usage = {r["agent"].name: r for r in detail.context["usage"]["agents"]}
    assert usage["helper"]["main"].effective is True
    assert usage["helper"]["sub"].effective is False and usage["helper"]["sub"].reason


def test_a_renderer_key_the_chat_page_lacks_is_refused(client, staff):
    client.force_login(staff)
    answer = client.post(reverse("admin:console_tool", args=["ls"]), {"enabled": "on", "allow_in_subagent": "on", "renderer_key": "fancy"})
    assert answer.status_code == 200
    assert "no chat renderer &#x27;fancy&#x27;" in answer.content.decode()
    assert not ToolConfig.objects.filter(name="ls").exists()
    answer = client.post(reverse("admin:console_tool", args=["ls"]), {"enabled": "on", "allow_in_subagent": "on", "renderer_key": "grep"})
    assert answer.status_code == 302 and ToolConfig.objects.get(name="ls").renderer_key == "grep"


def test_console_pages_need_staff(client, owner):
    client.force_login(owner)
    for url in (reverse("admin:index"), reverse("admin:console_tools"), reverse("admin:console_tool", args=["ls"])):
        assert client.get(url).status_code == 302  # to the admin's sign-in


def write_skill(root, name, body, *, extra=""):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} does things.\n{extra}---\n{body}\n", encoding="utf-8")


def test_skill_page_history_diff_precedence_and_who_can_use_it(client, staff, agent, tmp_path, settings):
    from skills_registry import services
    from skills_registry.discovery import SkillRoot

    high, low = tmp_path / "high", tmp_path / "low"
    write_skill(low, "notes", "Old low body.")
    write_skill(high, "notes", "First line.\nSecond line.")
    write_skill(high, "manual", "Only a person starts me.", extra="disable-model-invocation: true\n")
    roots = [SkillRoot(path=high, scope="workspace", label="high"), SkillRoot(path=low, scope="user", label="low")]
    services.skills_sync(roots=roots)
    write_skill(high, "notes", "First line.\nSecond line, changed.")
    services.skills_sync(roots=roots)
    from skills_registry.models import SkillResource

    winner = SkillResource.objects.get(name="notes", status="active")
    assert winner.revision == 2
    Agent.objects.create(  # the parent: delegates to helper, hands it the notes skill
        name="parent", model=agent.model, skill_policy={"subagent_allowed": ["notes"]},
        subagent_policy={"enabled": True, "agents": ["helper"], "skills": ["notes"]},
    )
    client.force_login(staff)
    answer = client.get(reverse("admin:console_skill", args=[winner.pk]))
    page = answer.content.decode()
    assert '<span class="diff-del">-Second line.</span>' in page and '<span class="diff-add">+Second line, changed.</span>' in page
    parts = answer.context["precedence"]
    assert [p["row"].status for p in parts] == ["active", "shadowed"] and str(winner.entry_file) in parts[1]["why"]
    usage = {u["agent"].name: u for u in answer.context["usage"]}
    assert usage["helper"]["main"].model_visible is True
    assert usage["parent"]["children"] == [{"child": "helper", "ok": True, "reason": "on the parent's subagent skills, and the child may see it"}]
    manual = SkillResource.objects.get(name="manual")
    usage = {u["agent"].name: u for u in client.get(reverse("admin:console_skill", args=[manual.pk])).context["usage"]}
    row = usage["helper"]["main"]
    assert row.visible is True and row.model_visible is False and "disable-model-invocation" in row.reason
    assert usage["parent"]["children"][0]["ok"] is False
    listing = client.get(reverse("admin:skills_registry_skillresource_changelist")).content.decode()
    assert reverse("admin:console_skill", args=[manual.pk]) in listing


def test_runs_list_columns_search_date_filter_links_and_who_aborted(client, staff, owner, agent):
    from runtime.models import SubprocessRun

    failed = AgentRun.objects.create(session_id="sess-f", agent=agent, user=owner, status="failed", error="boom: the model refused\nsecond line", input_tokens=7, output_tokens=3)
    queued = AgentRun.objects.create(session_id="sess-q", agent=agent, user=owner, status="queued")
    old = AgentRun.objects.create(session_id="sess-old", agent=agent, status="completed")
    AgentRun.objects.filter(pk=old.pk).update(created_at=timezone.now() - dt.timedelta(days=40))
    SubprocessRun.objects.create(session_id="sess-f", batch_id="b", parent_run=failed, tool_call_id="c", task_index=0, mode="single", agent="helper", task="t")
    client.force_login(staff)
    url = reverse("admin:runtime_agentrun_changelist")
    page = client.get(url).content.decode()
    assert "boom: the model refused" in page and "second line" not in page
    assert "7 / 3" in page and "cheap" in page  # tokens; the agent's model
    assert f"?parent_run__id__exact={failed.pk}" in page
    assert reverse("admin:sessions_tree_agentsession_change", args=["sess-f"]) in page
    children = client.get(reverse("admin:runtime_subprocessrun_changelist") + f"?parent_run__id__exact={failed.pk}")
    assert children.status_code == 200 and list(children.context["cl"].result_list) == list(SubprocessRun.objects.all())

    def listed(query):
        return {r.session_id for r in client.get(url + query).context["cl"].result_list}

    assert listed("?q=owner") == {"sess-f", "sess-q"}  # by user
    assert listed("?q=helper") == {"sess-f", "sess-q", "sess-old"}  # by agent
    assert listed(f"?q={failed.session_id}") == {"sess-f"}
    since = (timezone.now() - dt.timedelta(days=7)).date().isoformat()
    assert listed(f"?created_at__gte={since}") == {"sess-f", "sess-q"}  # by date

    answer = client.post(url, {"action": "abort_runs", "_selected_action": [queued.pk]}, follow=True)
    assert answer.status_code == 200
    queued.refresh_from_db()
    assert queued.status == "aborted" and queued.cancelled_by == staff and "staff" in queued.error
    row = next(r for r in client.get(url).context["cl"].result_list if r.pk == queued.pk)
    assert row.cancelled_by.username == "staff"


def test_the_console_pages_writes_are_in_the_audit_log(client, staff, owner, agent):
    from audit.models import AuditEntry
    from tests.support.builders import model_form as form

    client.force_login(staff)
    assert client.post(reverse("admin:runtime_modelconfig_add"), form(name="audited", options='{"delay_ms": 0}')).status_code == 302
    assert client.post(reverse("admin:console_tool", args=["bash"]), {"enabled": "on", "renderer_key": ""}).status_code == 302
    run = AgentRun.objects.create(session_id="s-audit", agent=agent, user=owner, status="queued")
    client.post(reverse("admin:runtime_agentrun_changelist"), {"action": "abort_runs", "_selected_action": [run.pk]})
    entries = {e.action: e for e in AuditEntry.objects.all()}
    assert {"model.create", "tool.change", "run.abort"} <= set(entries)
    for action in ("model.create", "tool.change", "run.abort"):
        assert entries[action].actor == staff and entries[action].via == "console"
    assert entries["tool.change"].after == {"allow_in_subagent": False}
    assert entries["model.create"].after["options"] == {"delay_ms": 0}


def test_a_tools_page_names_the_settings_that_configure_it(client, staff, settings, monkeypatch):
    client.force_login(staff)
    settings.NETA_WEB_SEARCH_BACKEND = ""
    page = client.get(reverse("admin:console_tool", args=["web_search"])).content.decode()
    assert "Not available on this server: no search backend configured" in page
    assert 'data-setting="NETA_WEB_SEARCH_BACKEND"' in page and 'data-setting="NETA_WEB_SEARCH_KEY_ENV"' in page
    settings.NETA_WEB_SEARCH_BACKEND = "brave"
    settings.NETA_WEB_SEARCH_KEY_ENV = "SEARCH_TEST_KEY"
    monkeypatch.setenv("SEARCH_TEST_KEY", "a-secret-key-value")
    page = client.get(reverse("admin:console_tool", args=["web_search"])).content.decode()
    assert "<code>brave</code>" in page and "<code>SEARCH_TEST_KEY</code> — the variable is set" in page
    assert "a-secret-key-value" not in page  # the name of the variable, never its value
    assert "Server settings" not in client.get(reverse("admin:console_tool", args=["read"])).content.decode()


def test_a_process_that_is_gone_is_shown_gone(client, staff):
    import subprocess

    from runtime.runs.process import HOST

    finished = subprocess.Popen(["true"])
    finished.wait()
    now = timezone.now()
    ProcessBeat.objects.create(duty="reaper", host=HOST, pid=finished.pid, role="web", at=now)
    ProcessBeat.objects.create(duty="reaper", host="another-host", pid=1, role="celery worker", node="w1@another-host", at=now - dt.timedelta(hours=1))
    reap_stale_runs(start=False)  # this process's own beat: running
    states = {(b["host"], b["pid"]): b["state"] for b in health.last_beats()}
    assert states[(HOST, finished.pid)] == "gone" and states[("another-host", 1)] == "silent"
    assert "running" in states.values()
    client.force_login(staff)
    page = client.get(reverse("admin:index")).content.decode()
    assert 'data-process-state="gone"' in page and 'data-process-state="silent"' in page and "w1@another-host" in page

