"""The processes ``bench.product_load`` measures: a Neta deployment started the way an operator starts one.

Embedded: one ``python -m neta.serve`` (Daphne) on SQLite, file sessions, the
in-memory channel layer and the inline backend. Distributed: two Daphnes and
``worker_processes`` runs workers as deploy/Procfile starts them (``celery -A neta
worker -P threads -c <worker_concurrency>``) on MariaDB and Redis (the sessions
directory shared). ``add_wire_agent`` adds an agent ``wire`` on a model served by
``bench/fake_provider.py`` (Anthropic's protocol).
Everything is set up through ``manage.py`` (``migrate``, ``neta_bootstrap``,
``token_create``) and environment variables; no Neta module is imported here.

Every process runs in its own process group. :meth:`Stack.stop` sends TERM to
each leader, KILL after 10 s, then KILL to whatever is left of each group; it
drops the MariaDB database and the Redis keys under the stack's prefix, and
removes the temp dir (unless ``keep``).
Ports are free ones the kernel picked (bind to port 0).

Statement counting (bench-side, no product change): every process of the stack
starts with ``PYTHONPATH`` holding a ``sitecustomize.py`` written into the temp dir.
It counts the statements each database connection sends at the driver: SQLite
through ``sqlite3``'s trace callback (every statement SQLite runs, ``BEGIN``/
``COMMIT``/savepoints included), MySQLdb through ``Connection.query`` (every
statement sent to the server, ``commit()``/``rollback()`` too), and the connections
each opens. Each process writes its count to
``<tmp>/counts/<pid>`` twice a second (after a fork too, for Celery's children).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

SITECUSTOMIZE = r'''
"""Written by bench/load_stack.py: count database statements per process (bench only)."""
import os, threading, time

_count = [0, 0]  # statements, connections opened
_dir = os.environ.get("LOADBENCH_COUNTS")


def _bump(*_):
    _count[0] += 1


def _writer():
    path = os.path.join(_dir, str(os.getpid()))
    last = None
    while True:
        time.sleep(0.5)
        if _count != last:
            last = list(_count)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d %d" % tuple(last))
            os.replace(tmp, path)


def _start():
    threading.Thread(target=_writer, name="loadbench-counter", daemon=True).start()


if _dir:
    import sqlite3
    import sqlite3.dbapi2

    _connect = sqlite3.connect

    def _traced_connect(*args, **kwargs):
        connection = _connect(*args, **kwargs)
        _count[1] += 1
        connection.set_trace_callback(_bump)
        return connection

    sqlite3.connect = sqlite3.dbapi2.connect = _traced_connect
    try:
        import MySQLdb.connections

        Connection = MySQLdb.connections.Connection
        _init, _query, _commit, _rollback = Connection.__init__, Connection.query, Connection.commit, Connection.rollback
        _autocommit = Connection.autocommit

        def _counted_init(self, *args, **kwargs):
            _count[1] += 1
            return _init(self, *args, **kwargs)

        def _counted_query(self, query):
            _count[0] += 1
            return _query(self, query)

        def _counted_commit(self):
            _count[0] += 1
            return _commit(self)

        def _counted_rollback(self):
            _count[0] += 1
            return _rollback(self)

        def _counted_autocommit(self, on):
            if self.get_autocommit() != bool(on):  # a switch is a statement sent (SET autocommit)
                _count[0] += 1
            return _autocommit(self, on)

        Connection.__init__, Connection.query, Connection.autocommit = _counted_init, _counted_query, _counted_autocommit
        Connection.commit, Connection.rollback = _counted_commit, _counted_rollback
    except ImportError:
        pass

    def _after_fork():
        _count[0] = _count[1] = 0
        _start()

    os.register_at_fork(after_in_child=_after_fork)
    _start()
'''

CREATE_USERS = r"""
import io, json, os
from django.contrib.auth import get_user_model
from django.core.management import call_command
tokens = []
for name in json.loads(os.environ["LOADBENCH_USERS"]):
    get_user_model().objects.create_user(name)
    out = io.StringIO()
    call_command("token_create", name, name="load bench", stdout=out, stderr=io.StringIO())
    tokens.append(out.getvalue().strip())
print(json.dumps(tokens))
"""


ADD_WIRE_AGENT = r"""
import os
from runtime.models import Agent, ModelConfig
model = ModelConfig.objects.create(
    name="wire-fake", display_name="Fake provider", provider_kind="anthropic", provider_name="anthropic",
    model_id="fake-20s", base_url=os.environ["LOADBENCH_WIRE_URL"], api_key_env="LOADBENCH_WIRE_KEY",
    context_window=200000, max_output_tokens=4096, supports_thinking=False,
)
agent = Agent.objects.get(name="default")
agent.pk, agent.id, agent.name, agent.model = None, None, "wire", model
agent.save()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mariadb_server() -> dict:
    """The server of NETA_BENCH_MYSQL_URL / NETA_TEST_MYSQL_URL, else root@127.0.0.1:3306."""
    url = os.environ.get("NETA_BENCH_MYSQL_URL") or os.environ.get("NETA_TEST_MYSQL_URL")
    if not url:
        return {"host": "127.0.0.1", "port": 3306, "user": "root"}
    parsed = urlparse(url)
    server = {"host": parsed.hostname or "127.0.0.1", "port": parsed.port or 3306, "user": unquote(parsed.username or "root")}
    if parsed.password:
        server["password"] = unquote(parsed.password)
    return server


def redis_url() -> str:
    return os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")


def services_available() -> str | None:
    """None when MariaDB and Redis answer, else why not."""
    try:
        import MySQLdb

        MySQLdb.connect(**mariadb_server(), connect_timeout=2).close()
    except Exception as exc:
        return f"MariaDB is not reachable ({exc})"
    try:
        import redis

        redis.Redis.from_url(redis_url(), socket_connect_timeout=2).ping()
    except Exception as exc:
        return f"Redis is not reachable ({exc})"
    return None


def proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(process group, CPU ticks user+system, RSS bytes) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[2]), int(fields[11]) + int(fields[12]), int(fields[21]) * PAGE


def pids_named(*names: str) -> list[int]:
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in names:
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found


@dataclass
class Stack:
    mode: str  # "embedded" or "distributed"
    worker_concurrency: int = 200
    worker_processes: int = 2
    worker_pool: str = "threads"  # or "prefork" (the runs worker before it ran on threads)
    keep: bool = False
    extra_env: dict = field(default_factory=dict)
    load_pids: dict = field(default_factory=dict)  # label -> pid: the load's processes (clients, fake provider), sampled too
    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.workdir = Path(tempfile.mkdtemp(prefix=f"neta-loadbench-{self.mode}-"))
        self.name = f"neta_loadbench_{os.getpid()}_{secrets.token_hex(3)}"
        (self.workdir / "site").mkdir()
        (self.workdir / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (self.workdir / "counts").mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NETA_") and k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")},
            "PYTHONPATH": f"{self.workdir / 'site'}{os.pathsep}{REPO}",
            "DJANGO_SETTINGS_MODULE": "neta.settings",
            "LOADBENCH_COUNTS": str(self.workdir / "counts"),
            "NETA_VAR_DIR": str(self.workdir / "var"),
            "NETA_SESSIONS_DIR": str(self.workdir / "sessions"),
            "NETA_WORKSPACE_DIR": str(self.workdir / "workspace"),
            "NETA_SECRET_KEY": secrets.token_urlsafe(32),
            "NETA_LOG_LEVEL": "WARNING",
            "NETA_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "NETA_DEFAULT_MODEL": "scripted-demo",
            "NETA_API_RATE_USER": "100000000/hour",  # the bench is one heavy user per few sessions
            "NETA_CHANNELS_PREFIX": self.name,
            "NETA_CELERY_QUEUE": self.name,
            "PYTHONUNBUFFERED": "1",
            "LOADBENCH_WIRE_KEY": "fake-key-not-secret",
        }
        if self.mode == "embedded":
            self.servers, self.workers = 1, 0
            self.env.update({"NETA_TASK_BACKEND": "inline", "NETA_DATABASE_URL": f"sqlite:///{self.workdir / 'var' / 'neta.sqlite3'}"})
        elif self.mode == "distributed":
            self.servers, self.workers = 2, self.worker_processes
            server = mariadb_server()
            auth = quote(server["user"], safe="") + (":" + quote(server["password"], safe="") if "password" in server else "")
            self.env.update({
                "NETA_TASK_BACKEND": "celery",
                "NETA_DATABASE_URL": f"mysql://{auth}@{server['host']}:{server['port']}/{self.name}",
                "NETA_REDIS_URL": redis_url(),
                "NETA_DB_PROCESSES": str(self.servers + self.workers),
            })  # fmt: skip
        else:
            raise ValueError(f"unknown mode {self.mode!r}")
        self.env.update(self.extra_env)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, users: int = 1, *, wire_url: str = "") -> None:
        """Migrate, bootstrap, add the agent ``wire`` when ``wire_url`` is given (before the
        processes start, so a worker loads its model's SDK at start-up, as it does where the
        models exist, and not within a measured turn), then start the processes."""
        (self.workdir / "var").mkdir()
        if self.mode == "distributed":
            self._mysql(f"CREATE DATABASE `{self.name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        self.run_manage("migrate", "--noinput")
        self.run_manage("neta_bootstrap")
        if wire_url:
            self.add_wire_agent(wire_url)
        for i in range(self.workers):
            self._spawn(f"worker{i}", [str(VENV_BIN / "celery"), "-A", "neta", "worker", "-l", "info", "-Q", self.name,
                                       "-P", self.worker_pool, "-c", str(self.worker_concurrency), "-n", f"{self.name}-w{i}@%h",
                                       "--without-gossip", "--without-mingle", "--without-heartbeat"])  # fmt: skip
        for i in range(self.servers):
            port = free_port()
            self.ports.append(port)
            self._spawn(f"daphne{i}", [sys.executable, "-m", "neta.serve", "-b", "127.0.0.1", "-p", str(port), "neta.asgi:application"])
        for i, port in enumerate(self.ports):
            self._wait_http(i, port)
        for i in range(self.workers):
            self._wait_log(f"worker{i}", "ready.")

    def add_wire_agent(self, base_url: str) -> None:
        """The agent ``wire``: the default agent's settings on a model of Anthropic's protocol
        at ``base_url`` (the fake provider), no tools (a reply is one long stream)."""
        self.run_manage("shell", "-c", ADD_WIRE_AGENT, env={"LOADBENCH_WIRE_URL": base_url})

    def connections(self) -> int:
        """Connections MariaDB has open to the stack's database now (every process's)."""
        if self.mode != "distributed":
            return 0
        rows = self._mysql(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{self.name}'")
        return int(rows[0][0])

    def add_users(self, count: int) -> list[str]:
        """Create ``count`` users with one token each (one ``manage.py shell``); returns the tokens."""
        names = [f"load{len(self.tokens) + i:05d}" for i in range(count)]
        out = self.run_manage("shell", "-c", CREATE_USERS, env={"LOADBENCH_USERS": json.dumps(names)})
        tokens = json.loads(out.strip().splitlines()[-1])
        self.tokens.extend(tokens)
        return tokens

    def stop(self) -> None:
        for _, process in self.processes:  # the leader first: Celery's warm shutdown stops its own pool
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _, process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=5)
            # the group's other members (Celery's pool children, tool processes) go with it
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.processes.clear()
        if self.mode == "distributed":
            try:
                self._mysql(f"DROP DATABASE IF EXISTS `{self.name}`")
            except Exception as exc:
                print(f"  (could not drop database {self.name}: {exc})", file=sys.stderr)
            try:
                import redis

                client = redis.Redis.from_url(redis_url())
                for key in client.scan_iter(f"*{self.name}*"):
                    client.delete(key)
            except Exception as exc:
                print(f"  (could not clean Redis keys {self.name}*: {exc})", file=sys.stderr)
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def run_manage(self, *args: str, env: dict | None = None) -> str:
        command = [sys.executable, "manage.py", *args]
        result = subprocess.run(command, cwd=REPO, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def _mysql(self, statement: str):
        import MySQLdb

        connection = MySQLdb.connect(**mariadb_server())
        try:
            cursor = connection.cursor()
            cursor.execute(statement)
            return cursor.fetchall()
        finally:
            connection.close()

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "w")
        process = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.processes.append((name, process))

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> dict[str, str]:
        return {name: self.log(name) for name, _ in self.processes}

    def _wait_http(self, index: int, port: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.processes and dict(self.processes)[f"daphne{index}"].poll() is not None:
                break
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/csrf/", timeout=2).read()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise RuntimeError(f"daphne{index} on port {port} did not come up:\n{self.log(f'daphne{index}')[-2000:]}")

    def _wait_log(self, name: str, marker: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.log(name):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not get ready:\n{self.log(name)[-3000:]}")

    # ------------------------------------------------------------------ measuring

    def members(self) -> dict[str, list[int]]:
        """Each named process of the stack with every live pid of its process group."""
        groups = {process.pid: name for name, process in self.processes}
        found: dict[str, list[int]] = {name: [] for name in groups.values()}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            pid = int(stat.parent.name)
            info = proc_stat(pid)
            if info and info[0] in groups:
                found[groups[info[0]]].append(pid)
        return found

    def sample(self) -> dict:
        """CPU seconds and RSS per named process (its whole group), plus the shared servers' CPU."""
        cpu, rss = {}, {}
        for name, pids in self.members().items():
            ticks = size = 0
            for pid in pids:
                info = proc_stat(pid)
                if info:
                    ticks += info[1]
                    size += info[2]
            cpu[name], rss[name] = ticks / CLK_TCK, size
        shared = {}
        for label, names in (("mariadbd*", ("mariadbd", "mysqld")), ("redis-server*", ("redis-server",))):
            if self.mode == "distributed":
                ticks = sum((proc_stat(pid) or (0, 0, 0))[1] for pid in pids_named(*names))
                shared[label] = ticks / CLK_TCK
        for label, pid in self.load_pids.items():  # the load's own processes, on the same cores
            shared[label] = (proc_stat(pid) or (0, 0, 0))[1] / CLK_TCK
        return {"cpu": cpu, "rss": rss, "shared_cpu": shared, "statements": self.statements(), "questions": self.questions()}

    def statements(self) -> tuple[int, int]:
        """(statements, connections opened) counted so far by every process of the stack, dead ones included."""
        time.sleep(0.6)  # let the writers flush
        statements = connections = 0
        for path in (self.workdir / "counts").iterdir():
            if path.suffix != ".tmp":
                try:
                    s, c = path.read_text().split()
                except (OSError, ValueError):
                    continue
                statements, connections = statements + int(s), connections + int(c)
        return statements, connections

    def questions(self) -> dict[str, int]:
        """MariaDB's global statement counters (shared by every client of the server)."""
        if self.mode != "distributed":
            return {}
        rows = self._mysql(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions','Com_select','Com_insert','Com_update',"
            "'Com_delete','Com_commit','Com_begin','Com_rollback','Innodb_deadlocks','Innodb_row_lock_waits')"
        )
        return {name: int(value) for name, value in rows}

    def deadlocks(self) -> str:
        if self.mode != "distributed":
            return ""
        rows = self._mysql("SHOW ENGINE INNODB STATUS")
        text = rows[0][2] if rows else ""
        start = text.find("LATEST DETECTED DEADLOCK")
        return text[start : text.find("TRANSACTIONS", start)] if start >= 0 else ""
