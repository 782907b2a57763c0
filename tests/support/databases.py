"""Migrated databases for the suite's deployments, made once per test process and copied.

A deployment test (a Celery worker, Daphne servers, ``manage.py`` children) needs a database
of its own, migrated like a fresh installation. ``manage.py migrate`` costs a Django start and
some seventy DDL statements each time; on two busy cores that was 20-50 s per test. Here the
first deployment of a process migrates a template (and, for ``bootstrapped=True``, runs
``neta_bootstrap`` on a copy of it; for a ``seed``, runs that Python code on a copy of the
bootstrapped one and keeps what it printed); every deployment then gets a copy:

- MariaDB: each table recreated from the template's own ``SHOW CREATE TABLE`` (columns,
  collations, indexes, foreign keys and all) and its rows copied;
- SQLite: the file copied.

A copy holds exactly what ``migrate`` (and ``neta_bootstrap``) would have written, down to
the ``django_migrations`` rows, so the processes started on it see a migrated installation.
The templates are dropped when the process ends.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHARSET = "CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"

_mariadb_templates: dict[tuple, str] = {}  # (server, stage) -> database name
_sqlite_templates: dict[object, Path] = {}  # stage -> file
_seed_output: dict[tuple, str] = {}  # (engine, seed) -> what the seed printed on the template
_scratch = Path(tempfile.mkdtemp(prefix="neta-db-templates-"))


def _server_url(server: dict, database: str) -> str:
    from urllib.parse import quote

    auth = quote(server["user"], safe="") + (":" + quote(server["password"], safe="") if "password" in server else "")
    return f"mysql://{auth}@{server['host']}:{server['port']}/{database}"


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def _seed(env: dict, code: str) -> str:
    script = "import django\ndjango.setup()\n" + code
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"the seed failed:\n{result.stderr[-3000:]}")
    return result.stdout


def _stage(bootstrapped: bool, seed: str | None):
    """The template a deployment is copied from: migrated, bootstrapped, or a seed's."""
    return ("seed", seed) if seed is not None else bootstrapped


def _template_env(database_url: str) -> dict:
    """What a fresh installation's ``manage.py`` sees: no NETA_* of the test run, a var dir of its own."""
    var = _scratch / secrets.token_hex(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(
        DJANGO_SETTINGS_MODULE="neta.settings",
        NETA_DATABASE_URL=database_url,
        NETA_VAR_DIR=str(var),
        NETA_SESSIONS_DIR=str(var / "sessions"),
        NETA_WORKSPACE_DIR=str(var / "workspace"),
    )
    return env


# ---------------------------------------------------------------------------- MariaDB


def _connect(server: dict):
    import MySQLdb

    return MySQLdb.connect(**server, charset="utf8mb4", autocommit=True)


def _copy_mariadb(server: dict, source: str, target: str) -> None:
    conn = _connect(server)
    try:
        cursor = conn.cursor()
        cursor.execute(f"CREATE DATABASE `{target}` {CHARSET}")
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'", (source,))
        tables = [name for (name,) in cursor.fetchall()]
        cursor.execute("SET SESSION foreign_key_checks = 0")  # tables are created in any order
        cursor.execute(f"USE `{target}`")
        for table in tables:
            cursor.execute(f"SHOW CREATE TABLE `{source}`.`{table}`")
            cursor.execute(cursor.fetchone()[1])
            cursor.execute(f"INSERT INTO `{target}`.`{table}` SELECT * FROM `{source}`.`{table}`")
    finally:
        conn.close()


def _mariadb_template(server: dict, stage) -> str:
    key = (tuple(sorted(server.items())), stage)
    if key not in _mariadb_templates:
        name = f"neta_tmpl_{os.getpid()}_{secrets.token_hex(3)}"
        if isinstance(stage, tuple):  # a seed, on a copy of the bootstrapped template
            _copy_mariadb(server, _mariadb_template(server, True), name)
            _seed_output[("mysql", stage[1])] = _seed(_template_env(_server_url(server, name)), stage[1])
        elif stage:
            _copy_mariadb(server, _mariadb_template(server, False), name)
            _manage(_template_env(_server_url(server, name)), "neta_bootstrap")
        else:
            conn = _connect(server)
            conn.cursor().execute(f"CREATE DATABASE `{name}` {CHARSET}")
            conn.close()
            _manage(_template_env(_server_url(server, name)), "migrate", "--noinput", "-v0")
        _mariadb_templates[key] = name
    return _mariadb_templates[key]


def mariadb_migrated(server: dict, database: str, *, bootstrapped: bool = False, seed: str | None = None) -> str:
    """Create ``database`` on ``server`` (MySQLdb connect arguments) as ``migrate`` (then
    ``neta_bootstrap``, then ``seed``) would leave it; return what the seed printed."""
    stage = _stage(bootstrapped, seed)
    _copy_mariadb(server, _mariadb_template(server, stage), database)
    return _seed_output.get(("mysql", seed), "")


# ---------------------------------------------------------------------------- SQLite


def _sqlite_template(stage) -> Path:
    if stage not in _sqlite_templates:
        path = _scratch / f"{secrets.token_hex(4)}.sqlite3"
        if isinstance(stage, tuple):  # a seed, on a copy of the bootstrapped template
            shutil.copyfile(_sqlite_template(True), path)
            _seed_output[("sqlite", stage[1])] = _seed(_template_env(f"sqlite:///{path}"), stage[1])
        elif stage:
            shutil.copyfile(_sqlite_template(False), path)
            _manage(_template_env(f"sqlite:///{path}"), "neta_bootstrap")
        else:
            _manage(_template_env(f"sqlite:///{path}"), "migrate", "--noinput", "-v0")
        _sqlite_templates[stage] = path
    return _sqlite_templates[stage]


def sqlite_migrated(path: Path, *, bootstrapped: bool = False, seed: str | None = None) -> str:
    """Write at ``path`` the SQLite file ``migrate`` (then ``neta_bootstrap``, then ``seed``)
    would leave; return what the seed printed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    template = _sqlite_template(_stage(bootstrapped, seed))
    shutil.copyfile(template, path)
    wal = template.with_name(template.name + "-wal")  # left when a connection was not closed
    if wal.exists():
        shutil.copyfile(wal, path.with_name(path.name + "-wal"))
    return _seed_output.get(("sqlite", seed), "")


@atexit.register
def drop_templates() -> None:
    """Drop this process's templates (at exit, and from ``pytest_unconfigure``)."""
    for (server, _), name in _mariadb_templates.items():
        try:
            conn = _connect(dict(server))
            conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
            conn.close()
        except Exception:  # noqa: BLE001 - the server may be gone at exit
            pass
    _mariadb_templates.clear()
    _sqlite_templates.clear()
    _seed_output.clear()
    shutil.rmtree(_scratch, ignore_errors=True)
