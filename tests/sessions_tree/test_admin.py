"""Sessions in the console: staff see meta, counters, diagnostics, entries read-only."""

from __future__ import annotations

import re

import pytest

from sessions_tree.pi_files import import_session_file
from sessions_tree.providers import get_provider, resolve_session_provider_kind
from tests.support.services import FIXTURES

pytestmark = pytest.mark.django_db


def test_staff_see_sessions_with_counts_and_the_active_path(client, staff, sessions_dir):
    meta = import_session_file(FIXTURES / "02-branches.jsonl")
    client.force_login(staff)
    listing = client.get("/admin/sessions_tree/agentsession/")
    assert listing.status_code == 200
    assert meta.session_id in listing.content.decode()
    page = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f"{len(get_provider('file').get_active_path(meta.session_id))} entries on the active path" in html
    assert "<details>" in html and meta.leaf_entry_id in html


def branched_session(kind: str = "file"):
    """u1 → a1 → u2 → a2, and a second answer to u1 (the leaf; u1 labeled "start"); returns (meta, ids)."""
    from tests.support.entries import assistant_message, user_message

    provider = get_provider(kind)
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message("first question"))
    a1 = provider.append_message(sid, assistant_message("first answer"))
    u2 = provider.append_message(sid, user_message("second question"))
    a2 = provider.append_message(sid, assistant_message("second answer"))
    provider.switch_leaf(sid, u1["id"])
    b1 = provider.append_message(sid, assistant_message("another answer"))
    provider.append_label_change(sid, target_id=u1["id"], label="start")
    provider.switch_leaf(sid, b1["id"])
    return provider.get_session(sid), {"u1": u1["id"], "a1": a1["id"], "u2": u2["id"], "a2": a2["id"], "b1": b1["id"]}


@pytest.mark.parametrize("kind", ["file", "mysql"])
def test_the_tree_page_shows_every_entry_with_the_path_and_the_leaf(client, staff, sessions_dir, kind):
    meta, ids = branched_session(kind)
    client.force_login(staff)
    change = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/change/").content.decode()
    # The console addresses a session by its id (runtime/admin.py); the numeric key still opens it.
    assert f"/admin/sessions_tree/agentsession/{meta.session_id}/tree/" in change and f"/sessions/{meta.session_id}/" in change
    page = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/tree/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "6 entries" in html  # five messages and the label
    for entry_id in ids.values():
        assert f"?at={entry_id}" in html
    assert html.count('class="on-path') == 2  # u1 and b1
    assert '<span class="label">start</span>' in html
    rows = re.findall(r"<li .*?</li>", html, re.S)
    assert len(rows) == 6
    leaf_rows = [r for r in rows if "◀ leaf" in r]
    assert len(leaf_rows) == 1 and ids["b1"] in leaf_rows[0]  # the label entry came after, but the leaf was moved back
    assert "second question" in html and "another answer" in html


def test_the_tree_page_is_paged(client, staff, sessions_dir, monkeypatch):
    from sessions_tree import admin as session_admin

    meta, _ = branched_session()
    monkeypatch.setattr(session_admin, "TREE_ROWS_PER_PAGE", 3)
    client.force_login(staff)
    html = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/tree/?page=2").content.decode()
    assert "rows 4–6 of 6 (page 2 of 2)" in html
    assert html.count("<li ") == 3


def test_the_context_page_replays_what_the_model_is_sent_at_any_entry(client, staff, sessions_dir):
    meta, ids = branched_session()
    client.force_login(staff)
    at_leaf = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/context/").content.decode()
    assert "the model is sent 2 messages" in at_leaf and "another answer" in at_leaf and "second question" not in at_leaf
    earlier = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/context/?at={ids['a2']}").content.decode()
    assert "the model is sent 4 messages" in earlier and "second answer" in earlier and "another answer" not in earlier
    assert client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/context/?at=ffffffff").status_code == 404
    assert client.get("/admin/sessions_tree/agentsession/999999/tree/").status_code == 404


def test_the_tree_and_context_pages_are_for_staff_only(client, owner, sessions_dir):
    meta, _ = branched_session()
    client.force_login(owner)
    for view in ("tree", "context"):
        response = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/{view}/")
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_damaged_file_diagnostics_are_shown(client, staff, sessions_dir):
    meta = import_session_file(FIXTURES / "damaged.jsonl")
    client.force_login(staff)
    html = client.get(f"/admin/sessions_tree/agentsession/{meta.pk}/change/").content.decode()
    assert "skippedLineCount" in html


def test_non_staff_are_kept_out(client, owner, sessions_dir):
    import_session_file(FIXTURES / "01-linear.jsonl")
    client.force_login(owner)
    assert client.get("/admin/sessions_tree/agentsession/").status_code == 302


def test_entries_admin_is_read_only(client, staff, sessions_dir):
    meta = import_session_file(FIXTURES / "01-linear.jsonl", provider_kind="mysql")
    client.force_login(staff)
    listing = client.get("/admin/sessions_tree/sessionentry/")
    assert listing.status_code == 200 and meta.root_entry_id in listing.content.decode()
    assert client.get("/admin/sessions_tree/sessionentry/add/").status_code == 403


@pytest.mark.parametrize("table", ["sessionentry", "sessionevent"])
def test_entry_and_event_rows_cannot_be_changed_or_deleted_even_by_a_superuser(client, staff, sessions_dir, table):
    """A row changed behind the provider would skip the revision, the event and the caches."""
    from sessions_tree.models import AgentSession, SessionEntry, SessionEvent

    meta = import_session_file(FIXTURES / "01-linear.jsonl", provider_kind="mysql")
    model = {"sessionentry": SessionEntry, "sessionevent": SessionEvent}[table]
    get_provider("mysql").append_session_info(meta.session_id, name="an event too")
    rows = list(model.objects.filter(session=meta).order_by("pk"))
    assert rows
    row = rows[0]
    before = (model.objects.filter(session=meta).count(), AgentSession.objects.get(pk=meta.pk).revision)
    base = f"/admin/sessions_tree/{table}/"
    client.force_login(staff)
    assert client.get(f"{base}{row.pk}/change/").status_code == 200  # viewing stays
    assert client.post(f"{base}{row.pk}/change/", {"type": "custom", "_save": "Save"}).status_code == 403
    assert client.get(f"{base}{row.pk}/delete/").status_code == 403
    assert client.post(f"{base}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    listing = client.get(base).content.decode()
    assert 'name="action"' not in listing  # no actions at all
    client.post(base, {"action": "delete_selected", "_selected_action": [r.pk for r in rows], "post": "yes"})
    assert (model.objects.filter(session=meta).count(), AgentSession.objects.get(pk=meta.pk).revision) == before
    assert model.objects.get(pk=row.pk).type == row.type


def test_the_kernel_session_admin_alone_is_read_only(rf, staff):
    """The kernel's class offers no writes; runtime/admin.py registers it with the services'."""
    from django.contrib.admin import AdminSite

    from sessions_tree.admin import AgentSessionAdmin
    from sessions_tree.models import AgentSession

    kernel = AgentSessionAdmin(AgentSession, AdminSite())
    request = rf.get("/")
    request.user = staff
    assert not kernel.has_add_permission(request)
    assert not kernel.has_change_permission(request)
    assert not kernel.has_delete_permission(request)
    assert kernel.has_view_permission(request)


@pytest.mark.parametrize(
    "config, expected",
    [
        (None, "file"),
        ({}, "file"),
        ({"session_provider": "mysql"}, "mysql"),
        ({"session_provider": "MYSQL "}, "mysql"),
        ({"sessionProvider": "file"}, "file"),
        ({"session_provider": "postgres"}, "file"),
        ({"session_provider": 3}, "file"),
    ],
)
def test_resolve_session_provider_kind(config, expected, caplog):
    assert resolve_session_provider_kind(config) == expected
    if config and config.get("session_provider") in ("postgres", 3):
        assert "unknown session provider" in caplog.text
