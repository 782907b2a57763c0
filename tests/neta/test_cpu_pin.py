"""The embedded web process on one CPU, its children on all (infra/cpu_pin.py,
infra/cpu_affinity.py): the rules, a fresh interpreter, the real sandbox and a
real ``neta.serve``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from infra.cpu_pin import choose

REPO = Path(__file__).resolve().parents[2]
ALL = set(range(4))


def test_auto_pins_the_embedded_server_to_the_cpu_it_runs_on():
    assert choose("auto", backend="inline", allowed=ALL, running_on=2) == 2
    assert choose(" AUTO ", backend="inline", allowed=ALL, running_on=None) == 0  # unknown: the first allowed
    assert choose("auto", backend="inline", allowed={1, 3}, running_on=0) == 1  # not an allowed one: ditto


def test_auto_leaves_a_server_whose_turns_run_in_workers_and_a_single_cpu_alone():
    assert choose("auto", backend="celery", allowed=ALL, running_on=1) is None
    assert choose("auto", backend="inline", allowed={0}, running_on=0) is None


def test_off_and_a_cpu_number():
    assert choose("off", backend="inline", allowed=ALL, running_on=1) is None
    assert choose("3", backend="celery", allowed=ALL, running_on=1) == 3  # a number pins any server


@pytest.mark.parametrize(
    "value, message",
    [("banana", "NETA_WEB_CPU must be auto, off or a CPU number, not 'banana'"),
     ("7", "NETA_WEB_CPU=7: this process may use CPUs [0, 1, 2, 3] only"),
     ("-1", "NETA_WEB_CPU=-1: this process may use CPUs [0, 1, 2, 3] only")],
)  # fmt: skip
def test_a_bad_setting_is_a_clear_error(value, message):
    with pytest.raises(ValueError) as error:
        choose(value, backend="inline", allowed=ALL, running_on=0)
    assert str(error.value) == message


def _cpus(tid: int | str = "self", pid: int | str = "self") -> set[int]:
    """A task's CPUs, as the kernel says (``Cpus_allowed_list``)."""
    path = f"/proc/{pid}/status" if tid == "self" else f"/proc/{pid}/task/{tid}/status"
    text = Path(path).read_text()
    listed = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Cpus_allowed_list"))
    cpus: set[int] = set()
    for part in listed.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _machine_cpus() -> set[int]:
    cpus = os.sched_getaffinity(0)
    assert len(cpus) >= 2, f"these tests need a machine with two CPUs or more (this process may use {sorted(cpus)})"
    return cpus


PROBE = r"""
import json, os, sys, threading
from pathlib import Path
started, release = threading.Event(), threading.Event()
def idle():
    started.set()
    release.wait()
before = threading.Thread(target=idle)  # a thread that exists before the pinning
before.start(); started.wait()
from neta.serve import serve_pinned
serve_pinned()
after = threading.Thread(target=release.wait)  # one started after it
after.start()
def cpus(tid):
    text = Path(f"/proc/self/task/{tid}/status").read_text()
    return next(l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("Cpus_allowed_list"))
threads = {str(t.native_id): cpus(t.native_id) for t in (threading.main_thread(), before, after)}
from infra.cpu_affinity import spawning, unpin_thread
from toolcatalog.sandbox import run_command
out = []
outcome = run_command(["nproc"], cwd=Path("/tmp"), env=dict(os.environ), timeout=30, cancel=threading.Event(), on_output=out.append)
tool_nproc = b"".join(out).decode().strip()
import subprocess
plain = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()  # started without widening
with spawning():
    widened = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
still = cpus(threading.get_native_id())
def unpinned(box):
    unpin_thread()
    box.append(cpus(threading.get_native_id()))
box = []
t = threading.Thread(target=unpinned, args=(box,)); t.start(); t.join()
release.set()
print(json.dumps({"threads": threads, "tool_nproc": tool_nproc, "plain": plain, "widened": widened,
                  "after_spawning": still, "unpinned": box[0]}))
"""


def _probe(tmp_path, **env) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "neta.settings", "NETA_VAR_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)


def test_every_thread_goes_to_one_cpu_and_children_get_them_all(tmp_path):
    cpus = _machine_cpus()
    out = _probe(tmp_path, NETA_TASK_BACKEND="inline", NETA_WEB_CPU="auto")
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    pinned = set(seen["threads"].values())
    assert len(pinned) == 1 and pinned.pop().isdigit()  # the main thread, one from before, one from after: one CPU
    # A tool's command (the real sandbox) and a child started in spawning() see every CPU ...
    assert seen["tool_nproc"] == seen["widened"] == str(len(cpus))
    # ... a child started without it would have had the one (why the places that start children widen).
    assert seen["plain"] == "1"
    assert seen["after_spawning"].isdigit()  # the thread went back to its CPU
    assert seen["unpinned"] == f"{min(cpus)}-{max(cpus)}" or "," in seen["unpinned"]


def test_off_leaves_every_thread_on_every_cpu(tmp_path):
    cpus = _machine_cpus()
    out = _probe(tmp_path, NETA_TASK_BACKEND="inline", NETA_WEB_CPU="off")
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["plain"] == seen["tool_nproc"] == str(len(cpus))
    assert len(set(seen["threads"].values())) == 1 and not set(seen["threads"].values()).pop().isdigit()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path, **env) -> tuple[subprocess.Popen, int, dict]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NETA_")},
        "DJANGO_SETTINGS_MODULE": "neta.settings",
        "NETA_VAR_DIR": str(tmp_path / "var"),
        "NETA_SESSIONS_DIR": str(tmp_path / "sessions"),
        "NETA_DATABASE_URL": f"sqlite:///{tmp_path / 'neta.sqlite3'}",
        "NETA_TASK_BACKEND": "inline",
        "NETA_ALLOWED_HOSTS": "127.0.0.1",
        **env,
    }
    port = _free_port()
    log = open(tmp_path / "serve.log", "ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "neta.serve", "-b", "127.0.0.1", "-p", str(port), "neta.asgi:application"],
        cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return process, port, environment


def test_the_embedded_server_serves_from_one_cpu(tmp_path):
    _machine_cpus()
    process, port, environment = _serve(tmp_path)
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=REPO, env=environment, capture_output=True, text=True)
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health/", timeout=5) as response:
                    assert response.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
        # Every thread it runs now (Daphne's, Twisted's, the views', the reaper's) is on one CPU.
        tids = os.listdir(f"/proc/{process.pid}/task")
        assert len(tids) > 2
        assert len({frozenset(_cpus(tid, process.pid)) for tid in tids}) == 1 and len(_cpus("self", process.pid)) == 1
        assert "web process pinned to CPU" in (tmp_path / "serve.log").read_text()
    finally:
        process.kill()
        process.wait(10)


def test_a_bad_setting_stops_the_server_with_its_message(tmp_path):
    process, _, _ = _serve(tmp_path, NETA_WEB_CPU="banana")
    assert process.wait(60) != 0
    assert "neta.serve: NETA_WEB_CPU must be auto, off or a CPU number, not 'banana'" in (tmp_path / "serve.log").read_text()
