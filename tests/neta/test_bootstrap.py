"""The run command's bootstrap: a staff account with a random password, once."""

from __future__ import annotations

import io
import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command


@pytest.mark.django_db
def test_bootstrap_creates_one_staff_account_with_a_random_password(settings, tmp_path, client):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("neta_bootstrap", stdout=out)
    password_file = tmp_path / "admin-password"
    username, password = password_file.read_text().split()
    assert username == "admin" and len(password) >= 12
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert password in out.getvalue()
    user = get_user_model().objects.get(username="admin")
    assert user.is_staff and user.check_password(password)
    assert client.login(username="admin", password=password)
    assert client.get("/admin/").status_code == 200

    # A second run changes nothing; a second installation gets another password.
    out = io.StringIO()
    call_command("neta_bootstrap", stdout=out)
    assert "staff account exists" in out.getvalue()
    assert password_file.read_text().split()[1] == password
    assert get_user_model().objects.count() == 1
