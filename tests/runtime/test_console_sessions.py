"""The console's session pages: addressed by session id; the list's run state and
cost in constant queries; the page's runs, and its actions through the services (move or
reset the leaf, compact, fork, archive, abort), refused while a run is active; audited."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit.models import AuditEntry
from runtime.models import AgentRun
from runtime.runs.prompts import session_prompt
from sessions_tree.models import AgentSession
from tests.support.rules import rules, summary_rule

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/sessions_tree/agentsession/"


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def driver(driver_for):
    return driver_for(rules(summary_rule(), default={"reply": [{"text": "answer"}]}), compaction_keep_recent_tokens=10)


def page_url(meta, what="change") -> str:
    return reverse(f"admin:sessions_tree_agentsession_{what}", args=[meta.session_id])


def test_the_list_shows_run_state_and_cost_in_constant_queries(console, driver_for, owner):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = console.get(LIST)
        assert response.status_code == 200
        return len(queries)

    d = driver_for(rules(default={"reply": [{"text": "ok"}]}))
    assert d.prompt("hello").status == "completed"
    few = count()
    html = console.get(LIST).content.decode()
    assert f'href="{page_url(AgentSession.objects.get(session_id=d.session_id))}"' in html  # linked by session id
    assert 'console-badge completed' in html
    run = AgentRun.objects.get(session_id=d.session_id)
    assert f"{run.cost:.4f}" in html
    for _ in range(12):
        other = d.__class__(d.agent)
        session_prompt(actor=None, session_id=other.session_id, text="queued", dispatch=False)
    assert count() == few


def test_the_page_by_session_id_shows_runs_and_actions(console, driver):
    assert driver.prompt("hello").status == "completed"
    meta = AgentSession.objects.get(session_id=driver.session_id)
    html = console.get(page_url(meta)).content.decode()
    assert "Move the leaf" in html and "Compact now" in html and "Fork" in html and "Archive" in html
    assert reverse("api:session-export", args=[meta.session_id]) in html
    assert str(AgentRun.objects.get(session_id=meta.session_id).run_id)[:8] in html
    assert console.get(reverse("admin:sessions_tree_agentsession_change", args=[meta.pk])).status_code == 200  # old links


def test_the_page_carries_the_live_tree_and_the_subagent_replay(console, driver):
    """The live tree is added by JavaScript over the page's static content (which stays); each
    subagent run's row names the run its replay reads, and staff read its events in pages."""
    import json

    from runtime.models import SubprocessEvent, SubprocessRun

    assert driver.prompt("hello").status == "completed"
    meta = AgentSession.objects.get(session_id=driver.session_id)
    parent = AgentRun.objects.get(session_id=meta.session_id)
    child = SubprocessRun.objects.create(
        session_id=meta.session_id, batch_id="b1", parent_run=parent, tool_call_id="c1", task_index=0, mode="single", agent="helper", task="t"
    )
    for seq in range(1, 6):
        SubprocessEvent.objects.create(run=child, seq=seq, type="assistant_delta", payload={"delta": f"part {seq}"})
    html = console.get(page_url(meta)).content.decode()
    data = html.split('<script id="neta-console-session" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["socket"] == f"/ws/sessions/{meta.session_id}/" and json.loads(data)["sessionId"] == meta.session_id
    assert '<div class="module console-live" id="session-live" hidden>' in html  # shown by the module, not without it
    assert 'type="importmap"' in html and "console/session_live.js" in html
    assert "entries on the active path" in html and "Move the leaf" in html  # the static page is all there without JS
    assert f'data-subagent-run="{child.run_id}"' in html
    url = reverse("api:subagent-run-events", args=[child.run_id])
    first = console.get(url, {"afterSeq": 0, "limit": 2}).json()
    assert [e["seq"] for e in first["events"]] == [1, 2] and first["hasMore"] is True
    rest = console.get(url, {"afterSeq": first["nextAfterSeq"], "limit": 10}).json()
    assert [e["seq"] for e in rest["events"]] == [3, 4, 5] and rest["hasMore"] is False


def test_reset_the_leaf_then_move_it_back_from_the_context_page(console, driver, staff):
    assert driver.prompt("hello").status == "completed"
    meta = AgentSession.objects.get(session_id=driver.session_id)
    leaf = meta.leaf_entry_id
    response = console.post(page_url(meta, "leaf"), {"entry_id": ""})
    assert response.status_code == 302
    meta.refresh_from_db()
    assert meta.leaf_entry_id is None
    row = AuditEntry.objects.get(action="session.switch_leaf")
    assert row.before == {"leaf_entry_id": leaf} and row.after["leaf_entry_id"] is None and row.actor == staff

    context = console.get(page_url(meta, "context") + f"?at={leaf}").content.decode()
    assert "Make this entry the leaf" in context
    console.post(page_url(meta, "leaf"), {"entry_id": leaf})
    meta.refresh_from_db()
    assert meta.leaf_entry_id == leaf


def test_rename_from_the_actions_bar_is_a_session_info_entry(console, driver, staff):
    assert driver.prompt("hello").status == "completed"
    meta = AgentSession.objects.get(session_id=driver.session_id)
    entries = meta.entry_count
    assert f'action="{page_url(meta, "rename")}"' in console.get(page_url(meta)).content.decode()
    response = console.post(page_url(meta, "rename"), {"title": "  Quarterly numbers  "}, follow=True)
    assert "Renamed: Quarterly numbers" in response.content.decode()
    meta.refresh_from_db()
    assert meta.title == "Quarterly numbers" and meta.entry_count == entries + 1  # Pi's session_info entry
    row = AuditEntry.objects.get(action="session.rename")
    assert row.actor == staff and row.via == "console" and row.after == {"title": "Quarterly numbers"}
    for bad in ("", "   ", "t" * 501):
        response = console.post(page_url(meta, "rename"), {"title": bad}, follow=True)
        assert any("Refused" in str(m) for m in response.context["messages"]), bad
    meta.refresh_from_db()
    assert meta.title == "Quarterly numbers" and AuditEntry.objects.filter(action="session.rename").count() == 1


def test_actions_are_refused_while_a_run_is_active_and_abort_first_works(console, driver):
    meta = AgentSession.objects.get(session_id=driver.session_id)
    run = session_prompt(actor=None, session_id=meta.session_id, text="pending", dispatch=False).run
    html = console.get(page_url(meta)).content.decode()
    assert "Abort the active run" in html and "are refused until it ends" in html
    response = console.post(page_url(meta, "leaf"), {"entry_id": ""}, follow=True)
    assert any("Refused" in str(m) and "a run is active" in str(m) for m in response.context["messages"])
    console.post(page_url(meta, "abort"))
    run.refresh_from_db()
    assert run.status == "aborted" and AuditEntry.objects.filter(action="run.abort").count() == 1


def test_compact_fork_and_archive(console, driver, staff):
    for text in ("one " * 40, "two " * 40, "three " * 40):
        assert driver.prompt(text).status == "completed"
    meta = AgentSession.objects.get(session_id=driver.session_id)
    response = console.post(page_url(meta, "compact"), follow=True)
    messages = [str(m) for m in response.context["messages"]]
    meta.refresh_from_db()
    assert meta.compaction_count == 1, messages

    response = console.post(page_url(meta, "fork"), {"entry_id": ""})
    fork = AgentSession.objects.exclude(pk=meta.pk).get()
    assert response["Location"] == page_url(fork) and fork.user == staff

    console.post(page_url(meta, "archive"))
    meta.refresh_from_db()
    assert meta.status == "archived"
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"session.compact", "session.fork", "session.set_status"} <= actions


def test_actions_need_post_and_the_change_permission(client, django_user_model, driver):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_agentsession"))
    client.force_login(user)
    meta = AgentSession.objects.get(session_id=driver.session_id)
    assert "Move the leaf" not in client.get(page_url(meta)).content.decode()
    assert client.post(page_url(meta, "archive")).status_code == 403
    assert client.get(page_url(meta, "archive")).status_code == 403
    meta.refresh_from_db()
    assert meta.status == "active"


