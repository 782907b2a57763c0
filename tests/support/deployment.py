"""The one builder of the suite's real deployments (and of the benchmarks').

A ``Deployment`` is Neta as an operator runs it, in processes of its own on one
database and one sessions directory:

- embedded: ``database="sqlite"``, ``backend="inline"``, the in-memory channel layer
  (``redis=False``), one server: ``make run``;
- distributed: ``database="mysql"`` (the suite's MariaDB), ``redis=True`` (channel
  layer and Celery broker), ``backend="celery"``, N servers and M Celery workers;
- N web servers on Redis with the inline backend, and any mix in between.

Servers are Daphne as ``make run`` serves it (``python -m neta.serve``); workers are
``celery -A neta worker``. Every process is started in a process group of its own and
can be killed with everything it started (``kill``), stopped (``stop``) or waited for
(``wait_dead``), and started again; its output goes to ``<workdir>/<name>.log``.
One-off processes (``python``, ``manage``, ``export``) are forked from the deployment's
fork server (``tests/support/forkserver.py``).

The database is a copy of a template migrated, bootstrapped and seeded once per test
process (``tests/support/databases.py``): the seed makes the default agent answer with
the scripted model and gives the user ``alice`` (password ``PASSWORD``) an API token
(``token``). ``rules`` are the scripted model's rules; a test sharing a deployment makes
an agent of its own (``add_agent``) and sessions of its own instead.

Everything a deployment keeps outside its work dir is named after it (``name``): its
MariaDB database, its Redis keys (channel-layer prefix), its Celery queues. ``close``
stops the processes, drops the database and deletes the keys.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.databases import mariadb_migrated, sqlite_migrated
from tests.support.forkserver import ForkServer
from tests.support.services import MARIADB, REDIS_URL, REPO, free_port, mariadb_connect, mariadb_url

VENV_BIN = Path(sys.executable).parent
USER = "alice"
PASSWORD = "pw-alice-not-secret"

# Run once on the bootstrapped template: the default agent on the scripted model, alice and
# her API token (the same in every copy of this process's template).
SEED = f"""
import json
from django.contrib.auth import get_user_model
from runtime.api.tokens import api_token_create
from runtime.models import Agent, ModelConfig
Agent.objects.filter(name="default").update(model=ModelConfig.objects.get(name="scripted-demo"))
alice = get_user_model().objects.create_user({USER!r}, password={PASSWORD!r})
print(json.dumps({{"token": api_token_create(user=alice, name="deployment").secret}}))
"""

# A management command in a fork server's child (argv: manage.py and the command's words).
MANAGE = "import sys\nfrom django.core.management import execute_from_command_line\nexecute_from_command_line(sys.argv)\n"

ADD_AGENT = """
import json, os
from runtime.models import Agent, ModelConfig
spec = json.loads(os.environ["NETA_TEST_AGENT"])
model = ModelConfig.objects.create(
    name=spec["name"] + "-model", display_name=spec["name"], provider_kind="scripted", provider_name="scripted",
    model_id="scripted-" + spec["name"], context_window=100000, price_input=1, price_output=2,
    supports_thinking=True, options={"rules": spec["rules"]},
)
Agent.objects.create(name=spec["name"], model=model, **spec["fields"])
"""

ADD_USER = """
import os
from django.contrib.auth import get_user_model
from runtime.api.tokens import api_token_create
user = get_user_model().objects.create_user(os.environ["NETA_TEST_USER"], password=os.environ["NETA_TEST_PASSWORD"])
print(api_token_create(user=user, name="test").secret)
"""


class Deployment:
    def __init__(
        self,
        workdir: Path,
        *,
        servers: int = 1,
        workers: int = 0,
        worker_concurrency: int = 1,
        rules: dict | None = None,
        database: str = "sqlite",  # or "mysql": the suite's MariaDB server
        redis: bool = False,  # True: the Redis channel layer (and the Celery broker)
        backend: str = "inline",  # or "celery"
        extra_env: dict | None = None,
        seed: str = "",  # more Python run once on this process's template (after SEED)
    ):
        assert database in ("sqlite", "mysql") and backend in ("inline", "celery")
        assert redis or backend == "inline", "the celery backend needs Redis (its broker)"
        self.workdir = Path(workdir)
        self.servers, self.workers, self.worker_concurrency = servers, workers, worker_concurrency
        self.rules, self.database, self.redis, self.backend = rules, database, redis, backend
        self.seed = SEED + seed
        self.name = f"neta_{os.getpid()}_{secrets.token_hex(3)}"
        self.queue = self.name  # the runs' Celery queue
        self.subagent_queue = f"{self.name}-sub"  # the subagent children's
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NETA_")},
            "DJANGO_SETTINGS_MODULE": "neta.settings",
            "NETA_CHANNELS_PREFIX": self.name,
            "NETA_CELERY_QUEUE": self.queue,
            "NETA_SUBAGENT_QUEUE": self.subagent_queue,
            "NETA_TASK_BACKEND": backend,
            "NETA_VAR_DIR": str(self.workdir / "var"),
            "NETA_SESSIONS_DIR": str(self.workdir / "sessions"),
            "NETA_WORKSPACE_DIR": str(self.workdir / "workspace"),
            "NETA_SECRET_KEY": secrets.token_urlsafe(32),
            "NETA_LOG_LEVEL": "WARNING",
            "NETA_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
        if database == "mysql":
            self.env["NETA_DATABASE_URL"] = mariadb_url(self.name)
        if redis:
            self.env["NETA_REDIS_URL"] = REDIS_URL
        self.env.update(extra_env or {})
        self.token = ""
        self.ports: list[int] = []  # the servers', in the order they started
        self.server_names: list[str] = []
        self.processes: dict[str, subprocess.Popen] = {}
        self.prepared = False
        self._forks: ForkServer | None = None  # one-off processes (python, manage)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Deployment:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def prepare(self) -> None:
        """The database (a copy of the seeded template), the work dir, the rules."""
        if self.prepared:
            return
        (self.workdir / "workspace").mkdir(parents=True, exist_ok=True)
        if self.database == "mysql":
            out = mariadb_migrated(MARIADB, self.name, seed=self.seed)
        else:
            out = sqlite_migrated(self.workdir / "var" / "neta.sqlite3", seed=self.seed)
        self.token = json.loads(out.strip().splitlines()[-1])["token"]
        self.prepared = True
        if self.rules is not None:
            self.set_rules(self.rules)

    def start(self) -> None:
        """Prepare, then start ``workers`` workers and ``servers`` servers, all at once."""
        self.prepare()
        workers = [self.spawn_worker(f"worker{i}", concurrency=self.worker_concurrency) for i in range(self.workers)]
        servers = [self.spawn_server(f"daphne{i}") for i in range(self.servers)]
        for name, offset in workers:
            self.wait_log(name, "ready.", offset)
        for name in servers:
            self.wait_server(name)

    def close(self) -> None:
        """Stop every process, drop the database, delete the Redis keys."""
        self.stop_all()
        if self.database == "mysql" and self.prepared:
            try:
                conn = mariadb_connect()
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{self.name}`")
                conn.close()
            except Exception:  # noqa: BLE001 - the server may be gone
                pass
        if self.redis:
            try:
                import redis

                client = redis.Redis.from_url(REDIS_URL)
                for key in client.scan_iter(f"*{self.name}*"):
                    client.delete(key)
                client.close()
            except Exception:  # noqa: BLE001
                pass

    # ------------------------------------------------------------------ processes

    def spawn(self, name: str, args: list[str], env: dict | None = None) -> subprocess.Popen:
        """Start ``args`` as process ``name`` (its log appended to ``<name>.log``)."""
        assert name not in self.processes or self.processes[name].poll() is not None, f"{name} is running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                args, cwd=REPO, env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes[name] = process
        return process

    def spawn_server(self, name: str | None = None, **env: str) -> str:
        """Start a server (not waiting for it); ``env``: settings of this one process."""
        name = name or f"daphne{len(self.server_names)}"
        port = free_port()
        # Served the way `make run` serves: Daphne with Neta's websocket limits (neta/serve.py).
        command = ["-m", "neta.serve", "-b", "127.0.0.1", "-p", str(port), "neta.asgi:application"]
        if os.environ.get("NETA_CLUSTER_PROFILE"):  # benchmarks: profile the servers (cProfile output per server)
            command = ["-m", "cProfile", "-o", str(self.workdir / f"{name}.prof"), *command]
        self.spawn(name, [sys.executable, *command], env)
        if name in self.server_names:
            self.ports[self.server_names.index(name)] = port
        else:
            self.server_names.append(name)
            self.ports.append(port)
        return name

    def start_server(self, name: str | None = None, **env: str) -> str:
        """Start a server and wait until it answers HTTP; return its name."""
        name = self.spawn_server(name, **env)
        self.wait_server(name)
        return name

    def spawn_worker(self, name: str, *, queues: str | None = None, concurrency: int = 1, pool: str = "prefork",
                     options: tuple[str, ...] = (), **env: str) -> tuple[str, int]:
        """Start a Celery worker (not waiting for it); return its name and its log's offset."""
        offset = len(self.log(name))
        args = [str(VENV_BIN / "celery"), "-A", "neta", "worker", "-l", "info", "-n", f"{self.name}-{name}@%h",
                "-P", pool, *(["-c", str(concurrency)] if pool in ("prefork", "threads") else []), *(["-Q", queues] if queues else []),
                "--without-gossip", "--without-mingle", "--without-heartbeat", *options]  # fmt: skip
        self.spawn(name, args, env)
        return name, offset

    def start_worker(self, name: str = "worker", **kwargs) -> subprocess.Popen:
        """Start a Celery worker (``spawn_worker``'s arguments) and wait until it is ready."""
        name, offset = self.spawn_worker(name, **kwargs)
        self.wait_log(name, "ready.", offset)
        return self.processes[name]

    def start_workers(self, *specs: dict) -> list[subprocess.Popen]:
        """Start several workers at once (each a dict of ``spawn_worker``'s arguments)."""
        started = [self.spawn_worker(**spec) for spec in specs]
        for name, offset in started:
            self.wait_log(name, "ready.", offset)
        return [self.processes[name] for name, _ in started]

    def kill(self, name: str) -> None:
        """SIGKILL the process and everything in its process group."""
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)

    def wait_dead(self, name: str, timeout: float = 30) -> None:
        """The process ends by itself (a crash point): wait for it, then clear its group."""
        process = self.processes[name]
        deadline = time.monotonic() + timeout
        while process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not end:\n{self.log(name)[-2000:]}")
            time.sleep(0.05)
        self.kill(name)

    def stop_all(self) -> None:
        """SIGTERM every process group, wait a little, SIGKILL what is left."""
        if self._forks is not None:
            self._forks.close()
            self._forks = None
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for name in list(self.processes):
            process = self.processes.pop(name)
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the group: children a worker or a server left
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, name: str, marker: str, offset: int = 0, timeout: float = 90) -> None:
        """Until ``marker`` shows in the process's log after ``offset``."""
        deadline = time.monotonic() + timeout
        while marker not in self.log(name)[offset:]:
            process = self.processes.get(name)
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not get ready:\n{self.log(name)[-3000:]}")
            time.sleep(0.1)

    def wait_server(self, name: str, timeout: float = 90) -> None:
        """Until the server answers HTTP (the application is loaded)."""
        port = self.ports[self.server_names.index(name)]
        deadline = time.monotonic() + timeout
        while True:
            process = self.processes[name]
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{self.log(name)[-3000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/csrf/", timeout=5).read()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} on port {port} did not come up:\n{self.log(name)[-2000:]}") from None
                time.sleep(0.1)

    def pids(self, prefix: str = "") -> list[int]:
        return [p.pid for n, p in self.processes.items() if n.startswith(prefix)]

    def cpu_seconds(self) -> float:
        """User + system CPU of every process of the deployment (workers' children included)."""
        groups = set(self.pids())
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) in groups:  # field 5 of stat: the process group
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    # ------------------------------------------------------------------ one-off processes

    def run(self, args: list[str], env: dict | None = None, timeout: float = 180) -> str:
        """Run a command of the deployment (its settings, its database); return its output."""
        result = subprocess.run(args, cwd=REPO, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout)
        return self._output(args, result)

    def python(self, code: str, env: dict | None = None, timeout: float = 180) -> str:
        """Run ``code`` in a fresh process of the deployment, Django set up (like ``manage.py shell -c``):
        a child of the deployment's fork server (``tests/support/forkserver.py``) unless ``env``
        changes a setting."""
        return self._fresh(["-c"], code, env, timeout)

    def manage(self, *args: str, timeout: float = 180) -> str:
        """``manage.py`` ``args`` in a fresh process of the deployment (a fork server's child)."""
        return self._fresh(["manage.py", *args], MANAGE, None, timeout)

    def _fresh(self, argv: list[str], code: str, env: dict | None, timeout: float) -> str:
        result = None
        if ForkServer.suits(env):
            if self._forks is not None and self._forks.env != self.env:  # a test changed the deployment's settings
                self._forks.close()
                self._forks = None
            self._forks = self._forks or ForkServer(self.env, REPO)
            result = self._forks.run(code, argv, env, timeout)
        if result is None:
            args = [sys.executable, "-c", "import django\ndjango.setup()\n" + code] if argv == ["-c"] else [sys.executable, *argv]
            result = subprocess.run(args, cwd=REPO, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout)
        return self._output([sys.executable, *argv], result)

    @staticmethod
    def _output(args: list[str], result: subprocess.CompletedProcess) -> str:
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])} failed:\n{result.stdout[-1000:]}\n{result.stderr[-3000:]}")
        return result.stdout

    def add_agent(self, name: str, rules: dict, **fields) -> str:
        """A scripted model answering by ``rules`` and an agent ``name`` on it (``fields``: the
        agent's, e.g. ``subagent_policy``; its thinking level is the default agent's, medium):
        what a test sharing a deployment answers with."""
        spec = {"name": name, "rules": rules, "fields": {"thinking_level": "medium", **fields}}
        self.python(ADD_AGENT, env={"NETA_TEST_AGENT": json.dumps(spec)})
        return name

    def add_user(self, username: str, password: str = PASSWORD) -> str:
        """A user and an API token of theirs (returned)."""
        out = self.python(ADD_USER, env={"NETA_TEST_USER": username, "NETA_TEST_PASSWORD": password})
        return out.strip().splitlines()[-1]

    def new_session(self, agent: str = "default") -> str:
        """A session of ``agent``: alice's over REST when a server runs, else made in a fresh process."""
        if self._serving():
            status, body = self.http(0, "post", "/api/sessions/", {"agent": agent})
            assert status == 201, body
            return body["sessionId"]
        code = (
            "from runtime.models import Agent; from runtime.sessions.services import session_start\n"
            f"print(session_start(agent=Agent.objects.get(name={agent!r})).session_id)"
        )
        return self.python(code).strip().splitlines()[-1]

    def prompt(self, text: str, *, agent: str = "default", session_id: str | None = None) -> tuple[str, str]:
        """Send ``text`` to a new session of ``agent`` (or to ``session_id``): over REST when a
        server runs, else from a fresh process as the REST view would; (session id, run id)."""
        if self._serving():
            session_id = session_id or self.new_session(agent)
            status, body = self.http(0, "post", f"/api/sessions/{session_id}/prompt/", {"text": text})
            assert status == 202, body
            return session_id, body["run"]["runId"]
        out = self.python(
            "from runtime.models import Agent; from runtime.runs.prompts import session_prompt\n"
            "from runtime.sessions.services import session_start\n"
            f"sid = {session_id!r} or session_start(agent=Agent.objects.get(name={agent!r})).session_id\n"
            f"outcome = session_prompt(actor=None, session_id=sid, text={text!r})\n"
            "print(sid, outcome.run.run_id)"
        )
        session_id, run_id = out.split()[-2:]
        return session_id, run_id

    def _serving(self) -> bool:
        return bool(self.server_names) and self.processes.get(self.server_names[0]) is not None

    # ------------------------------------------------------------------ the database

    def connect(self):
        """A DB-API connection to the deployment's database (autocommit)."""
        if self.database == "mysql":
            return mariadb_connect(self.name)
        conn = sqlite3.connect(self.workdir / "var" / "neta.sqlite3", timeout=30, isolation_level=None)
        return conn

    def sql(self, statement: str, *args) -> list[tuple]:
        """Run one statement (``%s`` placeholders); return its rows."""
        if self.database == "sqlite":
            statement = statement.replace("%s", "?")
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute(statement, args)
            return list(cursor.fetchall()) if cursor.description else [(cursor.rowcount,)]
        finally:
            conn.close()

    def set_rules(self, rules: dict, *, subagent_policy: dict | None = None) -> None:
        """The scripted model answers by ``rules`` (and the default agent's subagent policy is
        ``subagent_policy``), as an admin's edit of the model would set them."""
        self.sql("UPDATE runtime_modelconfig SET options = %s WHERE name = 'scripted-demo'", json.dumps({"rules": rules}))
        if subagent_policy is not None:
            self.sql("UPDATE runtime_agent SET subagent_policy = %s WHERE name = 'default'", json.dumps(subagent_policy))

    RUN_COLUMNS = ("run_id", "session_id", "status", "error", "prompt", "in_flight", "worker")

    def runs(self) -> list[dict]:
        """Every run, as rows (``run_id`` without dashes, whatever the database keeps)."""
        rows = self.sql("SELECT run_id, session_id, status, error, prompt, in_flight_entry_id, worker FROM runtime_agentrun ORDER BY id")
        found = [dict(zip(self.RUN_COLUMNS, row)) for row in rows]
        for row in found:
            row["run_id"] = str(row["run_id"]).replace("-", "")
        return found

    def run_row(self, run_id: str) -> dict:
        [row] = [r for r in self.runs() if r["run_id"] == run_id.replace("-", "")]
        return row

    def wait_run(self, run_id: str, predicate, timeout: float = 90, logs: tuple[str, ...] = ()) -> dict:
        """Until the run's row satisfies ``predicate``; returns the row."""
        deadline = time.monotonic() + timeout
        while True:
            row = self.run_row(run_id)
            if predicate(row):
                return row
            if time.monotonic() > deadline:
                names = logs or tuple(self.processes)
                raise AssertionError(f"run {run_id} stuck at {row}; logs:\n" + "\n".join(f"{n}: {self.log(n)[-2000:]}" for n in names))
            time.sleep(0.1)

    def checkpointed(self, session_id: str) -> bool:
        """Whether the session's in-flight entry (a streaming answer) has a checkpoint in the
        store: some text, thinking or tool call of the answer so far."""
        rows = self.sql("SELECT in_flight_payload FROM sessions_tree_agentsession WHERE session_id = %s", session_id)
        if not rows or not rows[0][0]:
            return False
        content = json.loads(rows[0][0]).get("message", {}).get("content") or []
        return any(block.get("text") or block.get("thinking") or block.get("type") == "toolCall" for block in content)

    def export(self, session_id: str) -> list[dict]:
        """The session's file as Pi reads it (``manage.py session_export``)."""
        return [json.loads(line) for line in self.manage("session_export", session_id).splitlines() if line.strip()]

    # ------------------------------------------------------------------ clients

    def port(self, server: int | str = 0) -> int:
        return self.ports[server if isinstance(server, int) else self.server_names.index(server)]

    def url(self, server: int | str, path: str) -> str:
        return f"http://127.0.0.1:{self.port(server)}{path}"

    def ws_url(self, server: int | str, session_id: str) -> str:
        return f"ws://127.0.0.1:{self.port(server)}/ws/sessions/{session_id}/"

    def origin(self, server: int | str) -> str:
        return f"http://127.0.0.1:{self.port(server)}"

    def http(self, server: int | str, method: str, path: str, body: dict | None = None, *, token: str | None = None,
             raw: bool = False, timeout: float = 30) -> tuple[int, dict | str]:
        """A REST call as alice (or the owner of ``token``): (status, JSON body, or text when not JSON or ``raw``)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url(server, path), data=data, method=method.upper())
        request.add_header("Authorization", f"Token {token or self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                payload, status = response.read(), response.status
        except urllib.error.HTTPError as exc:
            payload, status = exc.read(), exc.code
        text = payload.decode(errors="replace")
        if raw:
            return status, text
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


def cleanup_workdir(path: Path) -> None:
    """Remove a deployment's work dir (its processes' logs with it), unless
    ``NETA_CLUSTER_KEEP_WORKDIR`` is set: then it stays, for reading ``<name>.log``."""
    if os.environ.get("NETA_CLUSTER_KEEP_WORKDIR"):
        print(f"deployment work dir kept: {path}", file=sys.stderr)
        return
    shutil.rmtree(path, ignore_errors=True)
