"""Shared fixtures: who is acting, where sessions live, which real services exist.

What tests import lives in ``tests/support/`` (a test module or a conftest is never
imported: ``tests/test_layout.py``). A test that needs a real service (MariaDB, Redis,
node for the Pi oracle) uses it; when the service is missing the test fails under CI
(``CI=true``) and is skipped on a laptop, with the reason printed
(``tests.support.services.require``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test.utils import override_settings

from tests.support.services import ORACLE, require

# The harness: shared deployments, where each test runs, the reports (tests/support/harness.py).
pytest_plugins = ["tests.support.harness"]


def pytest_configure(config):
    """Each test process runs Pi's oracle from a cache folder of its own, removed at the end:
    the oracle script refreshes its folder on every call, so two concurrent calls on one
    folder race (two xdist workers, or two runs on one machine). The folder starts as hard
    links of the shared install, which the first process to need it makes (under a lock)."""
    if "PI_ORACLE_HOME" in os.environ or not ORACLE.exists():
        return
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        return  # the xdist controller runs no test
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    shared, home = cache / "neta-pi-oracle", cache / f"neta-pi-oracle-{os.getpid()}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "neta-pi-oracle.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "node_modules").is_dir() and shutil.which("npm"):
            shared.mkdir(exist_ok=True)
            for name in ("package.json", "install.sh"):
                shutil.copy(ORACLE.parent / name, shared / name)
            subprocess.run(["sh", "install.sh"], cwd=shared, capture_output=True, timeout=600, check=False)
    home.mkdir()
    if (shared / "node_modules").is_dir():
        subprocess.run(["cp", "-al", str(shared / "node_modules"), str(home / "node_modules")], check=False)
    os.environ["PI_ORACLE_HOME"] = str(home)
    config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashing():
    """Passwords in the test processes are hashed with MD5: Django's PBKDF2 (a million
    rounds) costs ~0.3 s of CPU a hash here, and the suite makes and checks hundreds.
    The deployments' servers keep the real hasher (their logins are hashed for real)."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """pytest-django's, but each test database is a copy of a template migrated once per run
    rather than once per xdist worker (tests/support/databases.py). pytest-django's
    ``--reuse-db``, ``--create-db`` and ``--nomigrations`` are not used by the suite."""
    from pytest_django.fixtures import _get_databases_for_setup

    from tests.support import databases

    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    with django_db_blocker.unblock():
        made = databases.django_test_databases(aliases, serialized_aliases)
    yield
    with django_db_blocker.unblock():
        databases.drop_django_test_databases(made)


@pytest.fixture
def sessions_dir(tmp_path, settings):
    path = tmp_path / "sessions"
    settings.NETA_SESSIONS_DIR = path
    return path


@pytest.fixture
def mysql_alias():
    require("mysql" in settings.DATABASES, "NETA_TEST_MYSQL_URL is not set (no MariaDB/MySQL server)")
    return "mysql"


@pytest.fixture(scope="session")
def oracle():
    require(ORACLE.exists(), f"Pi oracle not found at {ORACLE}")
    require(shutil.which("node") is not None and shutil.which("npm") is not None, "node/npm not installed")
    return ORACLE


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("outsider", password="pw-outsider")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="pw-staff", is_staff=True, is_superuser=True)


def pytest_unconfigure(config):
    """Remove what SQLite leaves beside the test database once Django has dropped it
    (``-wal``/``-shm``, kept when a child process still had it open), and the database
    templates of tests/support/databases.py."""
    databases = sys.modules.get("tests.support.databases")
    if databases is not None:
        databases.drop_templates()
    name = settings.DATABASES.get("default", {}).get("TEST", {}).get("NAME") if settings.configured else None
    if not name or "sqlite" not in settings.DATABASES["default"]["ENGINE"]:
        return
    base = Path(name)
    if not base.exists():
        for suffix in ("-wal", "-shm"):
            base.with_name(base.name + suffix).unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def no_auto_titles(request):
    """Sessions are not auto-titled in tests (runtime/runs/titles.py) unless a test asks
    with ``@pytest.mark.auto_titles``: most tests count the entries a run writes."""
    if request.node.get_closest_marker("auto_titles") is not None:
        yield
        return
    before = getattr(settings, "NETA_TITLE_MODEL", "")
    settings.NETA_TITLE_MODEL = "off"
    yield
    settings.NETA_TITLE_MODEL = before
