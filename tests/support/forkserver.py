"""One-off processes of a deployment, forked from a process that set Django up once.

A test asks a deployment to run code "in a fresh process" (``Deployment.python``) or a
management command (``Deployment.manage``) dozens of times a run; each fresh interpreter
spends about a second of CPU importing the project and calling ``django.setup()``. A
``ForkServer`` does that once per deployment: its process (the deployment's settings, its
own session) sets Django up, opens nothing (no database connection, no thread), and forks
a child for every request. The child is what a fresh process would be after
``django.setup()``: it gets the request's environment and argv, writes its stdout and
stderr to files, runs the code as ``__main__`` and ends as an interpreter ends (atexit
hooks, non-daemon threads joined, the exit status of ``SystemExit`` or 1 on an exception).

Settings are read once, when the server starts: a request whose environment would change
a setting (a ``NETA_*`` variable, other than ``NETA_TEST_*``) is not for a fork server,
and the caller runs it in a fresh process instead (``suits``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# The server's program: set Django up, then fork one child per request line.
SERVER = r"""
import json, os, sys
import django
django.setup()
requests, replies = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)

def serve():
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            requests.close(); replies.close()
            return request
        replies.write(json.dumps({"pid": pid}) + "\n"); replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n"); replies.flush()
    os._exit(0)

request = serve()
out, err = os.open(request["out"], os.O_WRONLY), os.open(request["err"], os.O_WRONLY)
os.dup2(out, 1); os.dup2(err, 2); os.close(out); os.close(err); os.close(null)
os.environ.update(request["env"])
sys.argv = request["argv"]
del serve, requests, replies, null, out, err
exec(compile(request["code"], "<forked>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"""


class ForkServer:
    """The fork server of one deployment's environment (started by the first ``run``)."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.env, self.cwd = dict(env), cwd
        self.process: subprocess.Popen | None = None
        self.lock = threading.Lock()

    @staticmethod
    def suits(env: dict[str, str] | None) -> bool:
        """Whether a request with ``env`` on top of the deployment's can be forked (it
        changes no setting)."""
        return not any(k.startswith("NETA_") and not k.startswith("NETA_TEST_") for k in env or {})

    def run(self, code: str, argv: list[str], env: dict[str, str] | None, timeout: float) -> subprocess.CompletedProcess | None:
        """Run ``code`` in a forked child; None when another call holds the server (the caller
        starts a fresh process then: two calls may wait on each other)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return self._run(code, argv, env or {}, timeout)
        finally:
            self.lock.release()

    def _run(self, code: str, argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVER], cwd=self.cwd, env=self.env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="neta-fork-") as folder:
            out, err = Path(folder) / "out", Path(folder) / "err"
            out.touch()
            err.touch()
            request = {"code": code, "argv": argv, "env": env, "out": str(out), "err": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = self._reply()["pid"]
            killed = threading.Event()
            timer = threading.Timer(timeout, _kill, (pid, killed))
            timer.start()
            try:
                status = self._reply()["status"]
            finally:
                timer.cancel()
            if killed.is_set():
                raise subprocess.TimeoutExpired(argv, timeout)
            return subprocess.CompletedProcess(argv, status, out.read_text(errors="replace"), err.read_text(errors="replace"))

    def _reply(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the deployment's fork server ended ({self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()
            self.process = None


def _kill(pid: int, killed: threading.Event) -> None:
    killed.set()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
