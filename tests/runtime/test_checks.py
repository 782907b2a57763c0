"""The runtime system checks warn about settings that start fine and then fail silently.

Through ``manage.py check`` in a fresh process (the settings as the environment makes
them) and through ``run_checks`` (the registry the management commands use).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.core.checks import run_checks
from django.utils import timezone

from runtime.models import AgentRun
from runtime.runs.process import HOST, process_start_time
from tests.support.rules import rules
from tests.support.services import REPO, require
from toolcatalog import sandbox

REDIS_URL = os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")


def manage_check(tmp_path, *args, **variables) -> str:
    """``manage.py check`` with only the given NETA_* variables (and a private state folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update({"NETA_VAR_DIR": str(tmp_path / "var"), "NETA_SANDBOX": "none", "PYTHONPATH": str(REPO), **variables})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    return result.stdout + result.stderr


def ids(messages) -> list[str]:
    return sorted(m.id for m in messages if m.id.startswith("runtime."))


def test_celery_without_redis_warns_that_worker_events_never_reach_sockets(tmp_path):
    out = manage_check(tmp_path, NETA_TASK_BACKEND="celery")
    assert "runtime.W001" in out and "never reach the sockets" in out
    assert "NETA_REDIS_URL" in out


def test_celery_on_sqlite_warns(tmp_path):
    out = manage_check(tmp_path, NETA_TASK_BACKEND="celery", NETA_REDIS_URL=REDIS_URL)
    assert "runtime.W002" in out and "SQLite" in out
    assert "runtime.W001" not in out  # the Redis layer reaches every process


@pytest.mark.mariadb
def test_celery_with_redis_and_mariadb_is_clean(tmp_path):
    url = os.environ.get("NETA_TEST_MYSQL_URL", "")
    require(bool(url), "NETA_TEST_MYSQL_URL is not set (no MariaDB/MySQL server)")
    out = manage_check(tmp_path, NETA_TASK_BACKEND="celery", NETA_REDIS_URL=REDIS_URL, NETA_DATABASE_URL=url)
    assert "runtime.W00" not in out, out
    assert "System check identified no issues" in out


def test_the_embedded_default_is_clean(tmp_path):
    out = manage_check(tmp_path)
    assert "runtime.W00" not in out, out


def test_run_checks_sees_the_same(settings):
    settings.NETA_TASK_BACKEND = "celery"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "runtime.realtime.layer.InProcessChannelLayer"}}
    on_sqlite = "sqlite" in settings.DATABASES["default"]["ENGINE"]
    assert ids(run_checks(tags=["runtime"])) == ["runtime.W001"] + (["runtime.W002"] if on_sqlite else [])
    settings.NETA_TASK_BACKEND = "inline"
    assert ids(run_checks(tags=["runtime"])) == []


def test_bwrap_asked_for_but_unavailable_is_reported_once(settings):
    """The sandbox has its own check (toolcatalog.E001); the full check run reports it, once."""
    settings.NETA_SANDBOX = "bwrap"
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    sandbox.reset_sandbox_probe()
    try:
        found = [m.id for m in run_checks() if "sandbox" in m.msg.lower() or "bwrap" in m.msg.lower()]
    finally:
        sandbox.reset_sandbox_probe()
    assert found == ["toolcatalog.E001"]


def test_bwrap_unavailable_fails_manage_check(tmp_path):
    out = manage_check(tmp_path, NETA_SANDBOX="bwrap", NETA_SANDBOX_BWRAP="/nonexistent/bwrap")
    assert "toolcatalog.E001" in out and "bwrap is not installed" in out


@pytest.fixture
def other_server():
    """A second live process on this host (standing in for a second server process)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    deadline = time.monotonic() + 10
    while process_start_time(child.pid) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    yield child.pid
    child.kill()
    child.wait()


def _run_owned_by(agent, pid: int) -> AgentRun:
    return AgentRun.objects.create(
        session_id=f"s-{pid}", agent=agent, backend="inline", status="done", host=HOST, pid=pid,
        process_started=process_start_time(pid), heartbeat_at=timezone.now(),
    )


@pytest.mark.django_db
def test_two_live_servers_on_the_in_process_layer_warn(settings, make_agent, other_server):
    settings.NETA_TASK_BACKEND = "inline"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "runtime.realtime.layer.InProcessChannelLayer"}}
    agent = make_agent(rules())
    _run_owned_by(agent, os.getpid())
    assert ids(run_checks(tags=["runtime"], databases=["default"])) == []  # one server: fine
    _run_owned_by(agent, other_server)
    found = [m for m in run_checks(tags=["runtime"], databases=["default"]) if m.id == "runtime.W003"]
    assert len(found) == 1 and "2 server processes" in found[0].msg and f"{HOST}:{other_server}" in found[0].msg
    # Not a database check run: nothing is read.
    assert ids(run_checks(tags=["runtime"])) == []
    # A shared (Redis) layer: no warning.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}}
    assert ids(run_checks(tags=["runtime"], databases=["default"])) == []


@pytest.mark.django_db
def test_a_dead_server_process_does_not_count(settings, make_agent):
    settings.NETA_TASK_BACKEND = "inline"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "runtime.realtime.layer.InProcessChannelLayer"}}
    agent = make_agent(rules())
    _run_owned_by(agent, os.getpid())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(gone.pid)
    gone.wait()
    AgentRun.objects.create(
        session_id="s-gone", agent=agent, backend="inline", status="lost", host=HOST, pid=gone.pid,
        process_started=started, heartbeat_at=timezone.now(),
    )
    assert ids(run_checks(tags=["runtime"], databases=["default"])) == []


@pytest.mark.django_db
def test_a_server_on_another_host_counts_only_while_its_heartbeats_are_fresh(settings, make_agent):
    import datetime as dt

    settings.NETA_TASK_BACKEND = "inline"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "runtime.realtime.layer.InProcessChannelLayer"}}
    agent = make_agent(rules())
    _run_owned_by(agent, os.getpid())
    elsewhere = AgentRun.objects.create(
        session_id="s-elsewhere", agent=agent, backend="inline", status="done", host=f"not-{HOST}", pid=4242,
        process_started=1, heartbeat_at=timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_STALE_SECONDS + 60),
    )
    assert ids(run_checks(tags=["runtime"], databases=["default"])) == []  # e.g. the host a redeploy replaced
    AgentRun.objects.filter(pk=elsewhere.pk).update(heartbeat_at=timezone.now())
    assert ids(run_checks(tags=["runtime"], databases=["default"])) == ["runtime.W003"]
