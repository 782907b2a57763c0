"""Where things are and which real services the suite talks to.

A test that needs a real part (MariaDB, Redis, Chromium, node for Pi's oracle) says so
with ``require``: when the part is missing the test fails under CI (``CI=true``) and is
skipped on a laptop, with the reason printed.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
ORACLE = SHARED / "pi-oracle" / "oracle"
FIXTURES = SHARED / "pi-oracle" / "fixtures"
IN_CI = os.environ.get("CI", "").lower() == "true"


def require(condition: bool, reason: str) -> None:
    """Skip on a laptop, fail in CI, when a real part the test needs is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required service missing in CI: {reason}")
    pytest.skip(reason)


def _mariadb_from_env() -> dict:
    """The server of NETA_TEST_MYSQL_URL (the contract suite's), else root@127.0.0.1:3306,
    as MySQLdb.connect arguments."""
    url = os.environ.get("NETA_TEST_MYSQL_URL")
    if not url:
        return {"host": "127.0.0.1", "port": 3306, "user": "root"}
    parsed = urlparse(url)
    server = {"host": parsed.hostname or "127.0.0.1", "port": parsed.port or 3306, "user": unquote(parsed.username or "root")}
    if parsed.password:
        server["password"] = unquote(parsed.password)
    return server


MARIADB = _mariadb_from_env()
# The deployments' Redis database. Every deployment keys what it keeps there by a name of
# its own (channel-layer prefix, Celery queues), so concurrent runs never meet.
REDIS_URL = os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")


def mariadb_url(database: str) -> str:
    """A ``NETA_DATABASE_URL`` for ``database`` on the suite's MariaDB server."""
    auth = quote(MARIADB["user"], safe="") + (":" + quote(MARIADB["password"], safe="") if "password" in MARIADB else "")
    return f"mysql://{auth}@{MARIADB['host']}:{MARIADB['port']}/{database}"


def mariadb_connect(database: str | None = None):
    import MySQLdb

    kwargs = {"db": database} if database else {}
    return MySQLdb.connect(**MARIADB, **kwargs, charset="utf8mb4", autocommit=True)


def mariadb_available() -> bool:
    try:
        import MySQLdb

        MySQLdb.connect(**MARIADB, connect_timeout=2).close()
        return True
    except Exception:  # noqa: BLE001 - any failure means: not reachable
        return False


def redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping())
    except Exception:  # noqa: BLE001
        return False


def require_mariadb_and_redis() -> None:
    require(mariadb_available(), f"MariaDB is not reachable on {MARIADB['host']}:{MARIADB['port']}")
    require(redis_available(), f"Redis is not reachable at {REDIS_URL}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 30, what: str = "a condition", interval: float = 0.05):
    """Poll ``predicate`` until it returns something true (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
