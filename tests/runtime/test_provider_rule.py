"""One rule for the session store: every read and write of an existing session goes to the
store that holds it (``provider_for_session``); the agent's ``session_provider`` only
chooses where *new* sessions go.

The same scenario runs on the embedded default (SQLite: the file provider and the mysql
provider's tables) and, in a child process whose default database is a fresh MariaDB
database, on the real server: an agent switched from file to mysql and back keeps
prompting, switching, compacting and summarizing its old sessions; a mysql session
imported for a file agent takes prompts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests.runtime.provider_rule_scenario import scenario
from tests.support.services import REPO, require


@pytest.mark.django_db(transaction=True)
def test_old_and_imported_sessions_keep_their_store(tmp_path):
    scenario(tmp_path)


@pytest.mark.slow
@pytest.mark.mariadb
def test_old_and_imported_sessions_keep_their_store_on_mariadb(tmp_path):
    from tests.support.databases import mariadb_migrated
    from tests.support.services import MARIADB, mariadb_available

    require(mariadb_available(), "MariaDB not reachable")
    import MySQLdb

    name = f"neta_h5_rule_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    conn = MySQLdb.connect(**MARIADB)
    mariadb_migrated(MARIADB, name)  # what `migrate` leaves (a copy of this process's template)
    auth = MARIADB["user"] + (":" + MARIADB["password"] if "password" in MARIADB else "")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NETA_")},
        "DJANGO_SETTINGS_MODULE": "neta.settings",
        "NETA_DATABASE_URL": f"mysql://{auth}@{MARIADB['host']}:{MARIADB['port']}/{name}",
        "NETA_VAR_DIR": str(tmp_path / "var"),
    }
    try:
        code = (
            "import django, pathlib; django.setup();"
            "from tests.runtime.provider_rule_scenario import scenario;"
            f"scenario(pathlib.Path({str(tmp_path)!r})); print('scenario ok')"
        )
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0 and "scenario ok" in result.stdout, result.stdout[-3000:] + result.stderr[-5000:]
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()
