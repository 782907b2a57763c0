"""Fixtures for the chat page's Python-side tests."""

from __future__ import annotations

import pytest

from sessions_tree.providers import file as file_provider
from sessions_tree.providers import get_provider
from sessions_tree.providers import mysql as mysql_provider
from tests.conftest import require

PROVIDERS = ["file", "mysql-sqlite", "mysql-mariadb"]


@pytest.fixture(params=PROVIDERS)
def provider(request, sessions_dir, settings):
    kind, _, database = request.param.partition("-")
    using = "default"
    if database == "mariadb":
        require("mysql" in settings.DATABASES, "NETA_TEST_MYSQL_URL is not set (no MariaDB/MySQL server)")
        using = "mysql"
    file_provider._indexes.clear()
    mysql_provider._indexes.clear()
    yield get_provider(kind, using=using)
    file_provider._indexes.clear()
    mysql_provider._indexes.clear()
