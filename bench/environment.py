"""The benchmarks' own Django environment: throw-away storage under ``var/bench/``.

Every bench process (the runner and the children it starts for cold opens)
calls :func:`setup` before touching Django. It points Neta at

- ``var/bench/`` for the var dir (secret key), the SQLite database
  ``var/bench/bench.sqlite3`` and the session files ``var/bench/sessions/``;
- the database ``neta_bench`` on the MySQL/MariaDB server of
  ``NETA_TEST_MYSQL_URL`` (alias ``mysql``), created if missing;

whatever the environment said before, so a benchmark never reads or writes the
user's sessions. ``NETA_BENCH_DIR`` moves the folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(os.environ.get("NETA_BENCH_DIR") or REPO / "var" / "bench").resolve()
BENCH_MYSQL_DB = "neta_bench"
_ready = False


def bench_mysql_url() -> str | None:
    """``NETA_TEST_MYSQL_URL`` with the database name replaced by ``neta_bench``."""
    url = os.environ.get("NETA_BENCH_MYSQL_URL") or os.environ.get("NETA_TEST_MYSQL_URL")
    if not url:
        return None
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=f"/{BENCH_MYSQL_DB}"))


def child_env() -> dict[str, str]:
    """The environment for a bench child process (same storage as this one)."""
    env = dict(os.environ)
    env.update(_variables())
    return env


def _variables() -> dict[str, str]:
    variables = {
        "DJANGO_SETTINGS_MODULE": "neta.settings",
        "NETA_VAR_DIR": str(BENCH_DIR),
        "NETA_DATABASE_URL": f"sqlite:///{BENCH_DIR / 'bench.sqlite3'}",
        "NETA_SESSIONS_DIR": str(BENCH_DIR / "sessions"),
        "NETA_LOG_LEVEL": "WARNING",
        "NETA_BENCH_DIR": str(BENCH_DIR),
    }
    mysql = bench_mysql_url()
    if mysql:
        variables["NETA_TEST_MYSQL_URL"] = mysql
        variables["NETA_BENCH_MYSQL_URL"] = mysql
    return variables


def setup(*, migrate: bool = False) -> None:
    """Configure and start Django on the bench storage (``migrate``: create the tables)."""
    global _ready
    if _ready:
        return
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    os.environ.update(_variables())
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if migrate and bench_mysql_url():
        _create_mysql_database()
    import django

    django.setup()
    if migrate:
        from django.conf import settings
        from django.core.management import call_command

        for alias in settings.DATABASES:
            call_command("migrate", database=alias, verbosity=0, interactive=False)
    _ready = True


def has_mysql() -> bool:
    from django.conf import settings

    return "mysql" in settings.DATABASES


def _create_mysql_database() -> None:
    import MySQLdb

    parsed = urlparse(bench_mysql_url())
    connection = MySQLdb.connect(
        host=parsed.hostname or "127.0.0.1",
        port=parsed.port or 3306,
        user=parsed.username or "root",
        password=parsed.password or "",
    )
    try:
        connection.cursor().execute(
            f"CREATE DATABASE IF NOT EXISTS `{BENCH_MYSQL_DB}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
    finally:
        connection.close()
