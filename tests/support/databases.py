"""Migrated databases for the suite's deployments, made once per test run and copied.

A deployment test (a Celery worker, Daphne servers, ``manage.py`` children) needs a database
of its own, migrated like a fresh installation. ``manage.py migrate`` costs a Django start and
some seventy DDL statements each time; on two busy cores that was 20-50 s per test. Here the
first deployment of a run migrates a template (and, for ``bootstrapped=True``, runs
``neta_bootstrap`` on a copy of it; for a ``seed``, runs that Python code on a copy of the
bootstrapped one and keeps what it printed); every deployment then gets a copy:

- MariaDB: each table recreated from the template's own ``SHOW CREATE TABLE`` (columns,
  collations, indexes, foreign keys and all) and its rows copied;
- SQLite: the file copied.

A copy holds exactly what ``migrate`` (and ``neta_bootstrap``) would have written, down to
the ``django_migrations`` rows, so the processes started on it see a migrated installation.

The templates belong to the run: the xdist workers of one run share them (whoever needs one
first makes it, under a lock; ``TESTS_SUPPORT_RUN``, set by the controller, names the run), and
the process that started the run drops them at its end. Other files the run's processes share
(the browser deployments' collected static files) go in a folder of the run (``run_folder``).
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHARSET = "CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"

# The run's templates: made by any of its processes, dropped by the one that started it.
RUN = os.environ.get("TESTS_SUPPORT_RUN") or f"p{os.getpid()}"
OWNER = os.environ.get("TESTS_SUPPORT_RUN_OWNER", str(os.getpid())) == str(os.getpid())
SCRATCH = Path(tempfile.gettempdir()) / f"neta-db-templates-{RUN}"

_known: dict[str, str] = {}  # template key -> database name or file (checked in this process)
_lock_held = False


@contextmanager
def _run_lock():
    """The run's lock on its templates (re-entered freely by the process holding it)."""
    global _lock_held
    if _lock_held:
        yield
        return
    SCRATCH.mkdir(parents=True, exist_ok=True)
    with open(SCRATCH / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _lock_held = True
        try:
            yield
        finally:
            _lock_held = False


def run_folder(name: str, make) -> Path:
    """A folder the run's processes share, ``make(folder)`` called once to fill it (by the
    first process to need it, under a lock of the folder's own); removed with the templates."""
    folder = SCRATCH / name
    done = SCRATCH / f"{name}.made"
    SCRATCH.mkdir(parents=True, exist_ok=True)
    with open(SCRATCH / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def _key(engine: str, stage, server: dict | None = None) -> str:
    """A template's name in the run: its engine, its server, its stage (a seed by its hash)."""
    stage_name = f"seed-{hashlib.sha1(stage[1].encode()).hexdigest()[:10]}" if isinstance(stage, tuple) else ("bootstrapped" if stage else "migrated")
    where = "" if server is None else "-" + hashlib.sha1(repr(sorted(server.items())).encode()).hexdigest()[:6]
    return f"{engine}{where}-{stage_name}"


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


def _template_env(database_url: str, key: str) -> dict:
    """What a fresh installation's ``manage.py`` sees: no NETA_* of the test run, a var dir of its own."""
    var = SCRATCH / f"{key}.var"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(
        DJANGO_SETTINGS_MODULE="neta.settings",
        NETA_DATABASE_URL=database_url,
        NETA_VAR_DIR=str(var),
        NETA_SESSIONS_DIR=str(var / "sessions"),
        NETA_WORKSPACE_DIR=str(var / "workspace"),
    )
    return env


def _stage(bootstrapped: bool, seed: str | None):
    """The template a deployment is copied from: migrated, bootstrapped, or a seed's."""
    return ("seed", seed) if seed is not None else bootstrapped


def _seed_output(key: str) -> str:
    path = SCRATCH / f"{key}.out"
    return path.read_text() if path.exists() else ""


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
    key = _key("mysql", stage, server)
    if key in _known:
        return _known[key]
    with _run_lock():
        done = SCRATCH / f"{key}.done"
        if not done.exists():
            name = f"neta_tmpl_{RUN}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"[:64]
            conn = _connect(server)
            conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")  # a half-made one
            conn.close()
            env = _template_env(_server_url(server, name), key)
            if isinstance(stage, tuple):  # a seed, on a copy of the bootstrapped template
                _copy_mariadb(server, _mariadb_template(server, True), name)
                (SCRATCH / f"{key}.out").write_text(_seed(env, stage[1]))
            elif stage:
                _copy_mariadb(server, _mariadb_template(server, False), name)
                _manage(env, "neta_bootstrap")
            else:
                conn = _connect(server)
                conn.cursor().execute(f"CREATE DATABASE `{name}` {CHARSET}")
                conn.close()
                _manage(env, "migrate", "--noinput", "-v0")
            done.write_text(json.dumps({"server": server, "name": name}))
        _known[key] = json.loads(done.read_text())["name"]
    return _known[key]


def mariadb_migrated(server: dict, database: str, *, bootstrapped: bool = False, seed: str | None = None) -> str:
    """Create ``database`` on ``server`` (MySQLdb connect arguments) as ``migrate`` (then
    ``neta_bootstrap``, then ``seed``) would leave it; return what the seed printed."""
    stage = _stage(bootstrapped, seed)
    _copy_mariadb(server, _mariadb_template(server, stage), database)
    return _seed_output(_key("mysql", stage, server))


# ---------------------------------------------------------------------------- SQLite


def _sqlite_template(stage) -> Path:
    key = _key("sqlite", stage)
    if key in _known:
        return Path(_known[key])
    with _run_lock():
        path, done = SCRATCH / f"{key}.sqlite3", SCRATCH / f"{key}.done"
        if not done.exists():
            env = _template_env(f"sqlite:///{path}", key)
            if isinstance(stage, tuple):  # a seed, on a copy of the bootstrapped template
                shutil.copyfile(_sqlite_template(True), path)
                (SCRATCH / f"{key}.out").write_text(_seed(env, stage[1]))
            elif stage:
                shutil.copyfile(_sqlite_template(False), path)
                _manage(env, "neta_bootstrap")
            else:
                path.unlink(missing_ok=True)
                _manage(env, "migrate", "--noinput", "-v0")
            done.write_text(json.dumps({"name": str(path)}))
        _known[key] = str(path)
    return path


def sqlite_migrated(path: Path, *, bootstrapped: bool = False, seed: str | None = None) -> str:
    """Write at ``path`` the SQLite file ``migrate`` (then ``neta_bootstrap``, then ``seed``)
    would leave; return what the seed printed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = _stage(bootstrapped, seed)
    template = _sqlite_template(stage)
    shutil.copyfile(template, path)
    wal = template.with_name(template.name + "-wal")  # left when a connection was not closed
    if wal.exists():
        shutil.copyfile(wal, path.with_name(path.name + "-wal"))
    return _seed_output(_key("sqlite", stage))


# ---------------------------------------------------------------------------- the test process's own


def _mysql_server(settings_dict: dict) -> dict:
    server = {"host": settings_dict.get("HOST") or "127.0.0.1", "port": int(settings_dict.get("PORT") or 3306), "user": settings_dict.get("USER") or "root"}
    if settings_dict.get("PASSWORD"):
        server["password"] = settings_dict["PASSWORD"]
    return server


def django_test_databases(aliases, serialized_aliases) -> list[tuple]:
    """What ``django.test.utils.setup_databases`` does for ``aliases``, the test databases
    copied from templates migrated once per run (by ``create_test_db`` itself) instead of
    migrated in every process. Returns what ``drop_django_test_databases`` takes."""
    from django.conf import settings
    from django.db import connections

    made = []
    for alias in sorted(aliases):
        connection = connections[alias]
        engine, old_name = connection.vendor, connection.settings_dict["NAME"]
        test_name = connection.creation._get_test_db_name()
        key = f"django-{alias}-{engine}"
        with _run_lock():
            done = SCRATCH / f"{key}.done"
            if not done.exists():
                template = str(SCRATCH / f"{key}.sqlite3") if engine == "sqlite" else f"test_tmpl_{RUN}_{alias}"[:64]
                test_settings = connection.settings_dict["TEST"]
                own_test_name = test_settings.get("NAME")
                test_settings["NAME"] = template
                try:
                    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
                finally:
                    connection.close()
                    test_settings["NAME"] = own_test_name
                    settings.DATABASES[alias]["NAME"] = connection.settings_dict["NAME"] = old_name
                server = _mysql_server(connection.settings_dict) if engine == "mysql" else None
                done.write_text(json.dumps({"engine": engine, "name": template, "server": server}))
            template = json.loads(done.read_text())
        if engine == "sqlite":
            Path(test_name).unlink(missing_ok=True)
            shutil.copyfile(template["name"], test_name)
            if Path(template["name"] + "-wal").exists():
                shutil.copyfile(template["name"] + "-wal", test_name + "-wal")
        else:
            conn = _connect(template["server"])
            conn.cursor().execute(f"DROP DATABASE IF EXISTS `{test_name}`")
            conn.close()
            _copy_mariadb(template["server"], template["name"], test_name)
        connection.close()
        settings.DATABASES[alias]["NAME"] = connection.settings_dict["NAME"] = test_name
        if alias in serialized_aliases:
            connection._test_serialized_contents = connection.creation.serialize_db_to_string()
        connection.ensure_connection()
        made.append((connection, old_name))
    return made


def drop_django_test_databases(made: list[tuple]) -> None:
    for connection, old_name in made:
        connection.creation.destroy_test_db(old_name, verbosity=0)


@atexit.register
def drop_templates() -> None:
    """Drop the run's templates (at exit, and from ``pytest_unconfigure``): in the process
    that started the run only (the others may still be copying)."""
    _known.clear()
    if not OWNER or not SCRATCH.exists():
        return
    for done in SCRATCH.glob("*.done"):
        try:
            made = json.loads(done.read_text())
            if not made.get("server"):
                continue  # a file: removed with the folder
            conn = _connect(made["server"])
            conn.cursor().execute(f"DROP DATABASE IF EXISTS `{made['name']}`")
            conn.close()
        except Exception:  # noqa: BLE001 - the server may be gone at exit
            pass
    shutil.rmtree(SCRATCH, ignore_errors=True)
