"""System checks: settings that start fine and then fail without a word.

* ``runtime.W001``: ``NETA_TASK_BACKEND=celery`` with a channel layer that lives in
  one process (no ``NETA_REDIS_URL``): the workers' tree and streaming events never
  reach the sockets, so the chat page waits for answers that were written.
* ``runtime.W002``: ``NETA_TASK_BACKEND=celery`` on SQLite: the workers share the
  database file, which works only on one host with a local disk, and every write of
  every worker and web process waits for the one writer lock.
* ``runtime.W003`` (database check, ``manage.py check --database default``): the
  inline backend with the in-process channel layer, and runs of the last hour were
  executed by more than one server process still alive (on this host: its pid runs;
  on another: its heartbeats are fresh): each has its own layer, so a socket on one
  never sees the runs of another. Detected only once both have run turns.

``NETA_SANDBOX=bwrap`` without a working bubblewrap is ``toolcatalog.E001`` (and the
``auto`` fallback ``toolcatalog.W002``): one check, in the app that owns the sandbox.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core import checks
from django.db import DatabaseError
from django.utils import timezone

from runtime.models import AgentRun
from runtime.runs.process import HOST, process_gone

# Channel layers whose groups exist in one process only.
PROCESS_LOCAL_LAYERS = ("runtime.realtime.layer.InProcessChannelLayer", "channels.layers.InMemoryChannelLayer")
# W003 looks at the runs of this last stretch.
RECENT = dt.timedelta(hours=1)


def _layer_is_process_local() -> bool:
    backend = (getattr(settings, "CHANNEL_LAYERS", {}) or {}).get("default", {}).get("BACKEND", "")
    return backend in PROCESS_LOCAL_LAYERS or not backend


def _on_sqlite() -> bool:
    return "sqlite" in settings.DATABASES["default"].get("ENGINE", "")


@checks.register("runtime")
def check_celery_channel_layer(app_configs=None, **kwargs):
    if settings.NETA_TASK_BACKEND != "celery" or not _layer_is_process_local():
        return []
    return [
        checks.Warning(
            "NETA_TASK_BACKEND=celery with a channel layer that lives in one process: runs execute in the "
            "Celery workers, and their events never reach the sockets of the web processes.",
            hint="Set NETA_REDIS_URL (the Redis channel layer) for every web process and worker.",
            id="runtime.W001",
        )
    ]


@checks.register("runtime")
def check_celery_sqlite(app_configs=None, **kwargs):
    if settings.NETA_TASK_BACKEND != "celery" or not _on_sqlite():
        return []
    return [
        checks.Warning(
            "NETA_TASK_BACKEND=celery on SQLite: the workers share the database file, which works only on one "
            "host with a local disk, and every write of every process waits for the one writer lock.",
            hint="Use NETA_DATABASE_URL=mysql://… for Celery deployments, or the inline backend on SQLite.",
            id="runtime.W002",
        )
    ]


@checks.register("runtime", checks.Tags.database)
def check_servers_share_no_layer(app_configs=None, databases=None, **kwargs):
    if not databases or "default" not in databases:
        return []
    if settings.NETA_TASK_BACKEND != "inline" or not _layer_is_process_local():
        return []

    now = timezone.now()
    fresh = now - dt.timedelta(seconds=settings.NETA_RUN_STALE_SECONDS)
    try:
        owners = set(
            AgentRun.objects.filter(backend="inline", heartbeat_at__gte=now - RECENT)
            .exclude(pid=None)
            .values_list("host", "pid", "process_started", "heartbeat_at")
        )
    except DatabaseError:  # not migrated yet: nothing to look at
        return []
    # A process on this host counts while it runs (/proc says so); one on another host only
    # while its runs' heartbeats are fresh (a host replaced by a redeploy is not a second server).
    live = sorted({
        (host, pid) for host, pid, started, beat in owners
        if (not process_gone(host, pid, started)) and (host == HOST or beat >= fresh)
    })
    if len(live) < 2:
        return []
    shown = ", ".join(f"{host}:{pid}" for host, pid in live[:5])
    return [
        checks.Warning(
            f"{len(live)} server processes ({shown}) run turns with the in-process channel layer: each has its "
            "own layer, so a socket on one never sees the runs (or tree events) of another.",
            hint="Run one server process, or set NETA_REDIS_URL so that all of them share the Redis channel layer.",
            id="runtime.W003",
        )
    ]
