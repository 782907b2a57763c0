"""Sessions in the console: staff see meta, counters, diagnostics, entries read-only."""

from __future__ import annotations

import pytest

from sessions_tree.pi_files import import_session_file
from sessions_tree.providers import get_provider, resolve_session_provider_kind
from tests.conftest import FIXTURES

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
