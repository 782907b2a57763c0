"""The ``provider`` fixture: every contract test runs on the file provider, the mysql
provider on SQLite, and the mysql provider on the real MariaDB server."""

from __future__ import annotations

import pytest

from sessions_tree.providers import get_provider
from tests.support.entries import forget_process_caches
from tests.support.services import require

PROVIDERS = ["file", "mysql-sqlite", "mysql-mariadb"]


@pytest.fixture(params=PROVIDERS)
def provider(request, sessions_dir, settings):
    kind, _, database = request.param.partition("-")
    using = "default"
    if database == "mariadb":
        require("mysql" in settings.DATABASES, "NETA_TEST_MYSQL_URL is not set (no MariaDB/MySQL server)")
        using = "mysql"
    forget_process_caches()
    yield get_provider(kind, using=using)
    forget_process_caches()
