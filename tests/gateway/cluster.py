"""A small real deployment for tests and benchmarks: N Daphne servers and M Celery
workers sharing one MariaDB database, one Redis and one sessions directory.

Every process is started in its own process group and killed as a group.
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
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.databases import mariadb_migrated, sqlite_migrated

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _mariadb_from_env() -> dict:
    """The server of NETA_TEST_MYSQL_URL (the contract suite's), else root@127.0.0.1:3306."""
    from urllib.parse import unquote, urlparse

    url = os.environ.get("NETA_TEST_MYSQL_URL")
    if not url:
        return {"host": "127.0.0.1", "port": 3306, "user": "root"}
    parsed = urlparse(url)
    server = {"host": parsed.hostname or "127.0.0.1", "port": parsed.port or 3306, "user": unquote(parsed.username or "root")}
    if parsed.password:
        server["password"] = unquote(parsed.password)
    return server


MARIADB = _mariadb_from_env()
# Channels and the Celery broker share this Redis database. Celery's queue name is
# fixed ("celery"), so clusters of concurrent test runs are kept apart by database.
REDIS_URL = os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")

BOOTSTRAP = r"""
import json, os, django
django.setup()
from django.contrib.auth import get_user_model
from runtime.models import Agent, ModelConfig
from runtime.agents.bootstrap import runtime_bootstrap
from runtime.api.tokens import api_token_create
runtime_bootstrap()
model = ModelConfig.objects.get(name="scripted-demo")
model.options = {"rules": json.loads(os.environ["CLUSTER_RULES"])}
model.save()
Agent.objects.filter(name="default").update(model=model)
user = get_user_model().objects.create_user(os.environ["CLUSTER_USER"])
print(json.dumps({"token": api_token_create(user=user).secret}))
"""


def mariadb_available() -> bool:
    try:
        import MySQLdb

        MySQLdb.connect(**MARIADB, connect_timeout=2).close()
        return True
    except Exception:
        return False


def redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping())
    except Exception:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    workdir: Path
    servers: int = 2
    workers: int = 1
    worker_concurrency: int = 1
    rules: dict = field(default_factory=dict)
    database: str = "mysql"  # or "sqlite" (the embedded default: a file under the work dir)
    redis: bool = True  # False: the in-memory channel layer (then only one server makes sense)
    backend: str = "celery"  # or "inline"
    extra_env: dict = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    token: str = ""
    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)

    def __post_init__(self):
        self.name = f"neta_gw_{os.getpid()}_{secrets.token_hex(3)}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NETA_")},
            "DJANGO_SETTINGS_MODULE": "neta.settings",
            "NETA_CHANNELS_PREFIX": self.name,
            "NETA_CELERY_QUEUE": self.name,  # clusters sharing a Redis db never take each other's runs
            "NETA_TASK_BACKEND": self.backend,
            "NETA_VAR_DIR": str(self.workdir / "var"),
            "NETA_SESSIONS_DIR": str(self.workdir / "sessions"),
            "NETA_WORKSPACE_DIR": str(self.workdir / "workspace"),
            "NETA_SECRET_KEY": secrets.token_urlsafe(32),
            "NETA_LOG_LEVEL": "WARNING",
            "NETA_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }
        if self.database == "mysql":
            from urllib.parse import quote

            auth = quote(MARIADB["user"], safe="") + (":" + quote(MARIADB["password"], safe="") if "password" in MARIADB else "")
            self.env["NETA_DATABASE_URL"] = f"mysql://{auth}@{MARIADB['host']}:{MARIADB['port']}/{self.name}"
        if self.redis:
            self.env["NETA_REDIS_URL"] = REDIS_URL

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # A copy of a database this process migrated once (tests/support/databases.py).
        if self.database == "mysql":
            mariadb_migrated(MARIADB, self.name)
        else:
            sqlite_migrated(self.workdir / "var" / "neta.sqlite3")
        out = self._run(
            [sys.executable, "-c", BOOTSTRAP], env={"CLUSTER_RULES": json.dumps(self.rules), "CLUSTER_USER": "alice"}
        )
        self.token = json.loads(out.strip().splitlines()[-1])["token"]
        for i in range(self.workers):
            self._spawn(
                f"worker{i}",
                [str(VENV_BIN / "celery"), "-A", "neta", "worker", "-l", "info", "-c", str(self.worker_concurrency),
                 "-n", f"{self.name}-w{i}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            )  # fmt: skip
        for i in range(self.servers):
            port = free_port()
            self.ports.append(port)
            # Served the way `make run` serves: Daphne with Neta's websocket limits (neta/serve.py).
            command = ["-m", "neta.serve", "-b", "127.0.0.1", "-p", str(port), "neta.asgi:application"]
            if os.environ.get("NETA_CLUSTER_PROFILE"):  # benchmarks: profile the servers (cProfile output per server)
                command = ["-m", "cProfile", "-o", str(self.workdir / f"daphne{i}.prof"), *command]
            command = [sys.executable, *command]
            self._spawn(f"daphne{i}", command)
        for port in self.ports:
            self._wait_http(port)
        for i in range(self.workers):
            self._wait_log(f"worker{i}", "ready.")

    def stop(self) -> None:
        for _, process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for _, process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        self.processes.clear()
        if self.database == "mysql":
            try:
                import MySQLdb

                conn = MySQLdb.connect(**MARIADB)
                conn.cursor().execute(f"DROP DATABASE IF EXISTS `{self.name}`")
                conn.close()
            except Exception:
                pass
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            for key in client.scan_iter(f"{self.name}*"):
                client.delete(key)
        except Exception:
            pass

    # ------------------------------------------------------------------ helpers

    def _run(self, args: list[str], env: dict | None = None) -> str:
        result = subprocess.run(args, cwd=REPO, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=180)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "w")
        process = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append((name, process))

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def pids(self, prefix: str = "") -> list[int]:
        return [p.pid for n, p in self.processes if n.startswith(prefix)]

    def cpu_seconds(self) -> float:
        """User + system CPU of every process of the cluster (workers' children included)."""
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

    def _wait_http(self, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/csrf/", timeout=2).read()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise RuntimeError(f"daphne on port {port} did not come up:\n{self.log('daphne0')[-2000:]}")

    def _wait_log(self, name: str, marker: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.log(name):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not get ready:\n{self.log(name)[-3000:]}")

    # ------------------------------------------------------------------ clients

    def url(self, server: int, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[server]}{path}"

    def ws_url(self, server: int, session_id: str) -> str:
        return f"ws://127.0.0.1:{self.ports[server]}/ws/sessions/{session_id}/"

    def origin(self, server: int) -> str:
        return f"http://127.0.0.1:{self.ports[server]}"

    def http(self, server: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict | str]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url(server, path), data=data, method=method.upper())
        request.add_header("Authorization", f"Token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw, status = response.read(), response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")


def cleanup_workdir(path: Path) -> None:
    """Remove a cluster's work dir (its processes' logs with it), unless
    ``NETA_CLUSTER_KEEP_WORKDIR`` is set: then it stays, for reading ``<name>.log``."""
    if os.environ.get("NETA_CLUSTER_KEEP_WORKDIR"):
        print(f"cluster work dir kept: {path}", file=sys.stderr)
        return
    shutil.rmtree(path, ignore_errors=True)
