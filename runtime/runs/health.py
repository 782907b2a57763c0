"""Is the platform working: the database (and whether its connections fit ``max_connections``), the channel layer, the Celery workers per queue,
the sandbox in force, the reaper's last pass and the MCP servers (``GET /api/health/``, the console's overview).

Each check is bounded by a short timeout and reports, never raises: a health page that
fails when Redis is down would hide the one thing it should show.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from runtime.models import AgentRun, ProcessBeat, RunStatus
from runtime.runs.process import process_gone
from toolcatalog.sandbox import effective_sandbox
from toolcatalog.selectors import mcp_server_states

logger = logging.getLogger(__name__)

CELERY_TIMEOUT = 0.5  # seconds a worker has to answer the broadcast
CONSUMER_CHECK_TIMEOUT = 1.0  # the same, when a parent asks before failing its children


def database_ok() -> tuple[bool, str, float]:
    """``SELECT 1`` on the default database: (ok, detail, milliseconds)."""
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return False, f"{type(exc).__name__}: {exc}", (time.monotonic() - started) * 1000
    return True, connection.vendor, (time.monotonic() - started) * 1000


def connection_budget() -> dict:
    """Whether the deployment's database connections fit the server's ``max_connections``:
    at most ``NETA_DB_POOL_SIZE`` per process (``infra/mysql_backend``) times the
    ``NETA_DB_PROCESSES`` that connect. Only on a pooled database (MariaDB/MySQL); ``ok``
    with nothing to say elsewhere. ``connected``: the server's connections now (all clients)."""
    if not getattr(connection, "pooled", False):
        return {"ok": True, "detail": f"{connection.vendor}: no connection limit to check"}
    needed = settings.NETA_DB_POOL_SIZE * settings.NETA_DB_PROCESSES
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@max_connections")
            limit = int(cursor.fetchone()[0])
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            row = cursor.fetchone()
    except DatabaseError as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    report = {"maxConnections": limit, "needed": needed, "connected": int(row[1]) if row else None}
    if needed > limit:
        detail = (f"NETA_DB_POOL_SIZE {settings.NETA_DB_POOL_SIZE} x NETA_DB_PROCESSES {settings.NETA_DB_PROCESSES} = "
                  f"{needed} connections can exceed the server's max_connections {limit}")  # fmt: skip
        return {"ok": False, "detail": detail, **report}
    return {"ok": True, "detail": f"up to {needed} of max_connections {limit}", **report}


def _redis_ping(url: str) -> tuple[bool, str]:
    import redis  # the Redis client comes with channels_redis; loaded only when a layer uses it

    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        client.ping()
    except redis.RedisError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return True, _("ping ok")


def channel_layer_status() -> dict:
    backend = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    kind = backend.rsplit(".", 1)[-1]
    if "redis" not in backend.lower():
        return {"ok": True, "backend": kind, "detail": _("in-process: events reach sockets of this process only")}
    ok, detail = _redis_ping(settings.NETA_REDIS_URL)
    return {"ok": ok, "backend": kind, "detail": detail}


def celery_queues() -> list[str]:
    return [settings.CELERY_TASK_DEFAULT_QUEUE, settings.NETA_SUBAGENT_QUEUE]


def celery_status(*, timeout: float = CELERY_TIMEOUT) -> dict:
    """Which workers consume each queue (a broadcast each live worker answers within ``timeout``),
    each with its last heartbeat: its reaper timer's last pass on that host."""
    queues = {name: [] for name in celery_queues()}
    inline = settings.NETA_TASK_BACKEND != "celery"
    roles = {settings.CELERY_TASK_DEFAULT_QUEUE: "turns", settings.NETA_SUBAGENT_QUEUE: "subagents"}
    result = {"backend": settings.NETA_TASK_BACKEND, "queues": queues, "roles": roles, "ok": True, "detail": ""}
    if inline:
        result["detail"] = _("inline backend: turns and subagents run in the web process")
        return result
    from celery import (
        current_app,  # the project's app (neta/celery.py), bound when Django loads
    )

    try:
        answers = current_app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception as exc:  # noqa: BLE001 - kombu raises the transport's errors (broker down)
        result.update(ok=False, detail=_("broker unreachable: %(error)s") % {"error": f"{type(exc).__name__}: {exc}"})
        return result
    beats = last_beats()
    for node, consumed in sorted(answers.items()):
        host = node.split("@", 1)[-1]
        # The worker's own beat by its node name (a worker started with -n name@host), else the
        # last beat of a celery worker on that host.
        beat = next((b for b in beats if b.get("node") == node), None) or next(
            (b for b in beats if b["host"] == host and b["role"] == "celery worker" and not b.get("node")), None
        )
        for queue in consumed or []:
            name = queue.get("name")
            queues.setdefault(name, []).append({"worker": node, "lastHeartbeat": beat["at"] if beat else None})
    result["depths"] = queue_depths(list(queues))
    oldest = AgentRun.objects.filter(status=RunStatus.QUEUED).order_by("created_at").values_list("created_at", flat=True).first()
    result["oldestQueuedSeconds"] = round((timezone.now() - oldest).total_seconds(), 1) if oldest else None
    missing = [name for name in celery_queues() if not queues.get(name)]
    if missing:
        said = [_("no subagent worker (nothing consumes %(queue)r)") % {"queue": name} if name == settings.NETA_SUBAGENT_QUEUE else name for name in missing]
        result.update(ok=False, detail=_("no worker answered for %(queues)s") % {"queues": ", ".join(said)})
    return result


def queue_consumers(queue: str, *, timeout: float = CONSUMER_CHECK_TIMEOUT) -> list[str] | None:
    """The live workers that consume ``queue`` (each answers a broadcast within ``timeout``);
    None when the broker cannot be asked. A prefork worker answers while its pool is busy;
    a ``solo`` worker busy with a task does not."""
    from celery import (
        current_app,  # the project's app (neta/celery.py), bound when Django loads
    )

    try:
        answers = current_app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception:  # noqa: BLE001 - kombu raises the transport's errors (broker down)
        logger.warning("could not ask the workers which queues they consume", exc_info=True)
        return None
    return sorted(node for node, consumed in answers.items() if any(q.get("name") == queue for q in consumed or []))


def queue_depths(names: list[str]) -> dict[str, int | None]:
    """Messages waiting in each Celery queue (a passive declare: the broker counts them); None
    for a queue the broker could not be asked about."""
    from celery import (
        current_app,  # the project's app (neta/celery.py), bound when Django loads
    )

    depths: dict[str, int | None] = {}
    try:
        with current_app.connection_for_read() as conn:
            channel = conn.default_channel
            for name in names:
                try:
                    depths[name] = int(channel.queue_declare(queue=name, passive=True).message_count)
                except Exception:  # noqa: BLE001 - a queue nobody declared yet holds nothing
                    depths[name] = 0
    except Exception:  # noqa: BLE001 - the broker's errors: reported as unknown, never raised
        logger.warning("could not count the Celery queues", exc_info=True)
        return {name: None for name in names}
    return depths


def last_beats(duty: str = "reaper", limit: int = 20) -> list[dict]:
    """The processes' last beats, each with its state: ``running`` (recent), ``gone`` (a process of
    this host that no longer runs: it stays listed as gone until its row ages out) or ``silent``
    (no beat for three intervals, on another host)."""
    rows = ProcessBeat.objects.filter(duty=duty).order_by("-at")[:limit]
    fresh = timezone.now() - dt.timedelta(seconds=3 * settings.NETA_REAPER_INTERVAL_SECONDS)
    out = []
    for b in rows:
        state = "gone" if process_gone(b.host, b.pid, None) else ("running" if b.at >= fresh else "silent")
        out.append({"host": b.host, "pid": b.pid, "role": b.role, "node": b.node, "state": state, "at": b.at.isoformat(), "changed": b.changed, "error": b.error})
    return out


def reaper_status() -> dict:
    beats = last_beats()
    interval = settings.NETA_REAPER_INTERVAL_SECONDS
    if not beats:
        return {"ok": False, "lastPass": None, "intervalSeconds": interval, "detail": _("no reaper pass recorded"), "processes": []}
    last = beats[0]
    age = (timezone.now() - dt.datetime.fromisoformat(last["at"])).total_seconds()
    ok = age <= 3 * interval and not last["error"]
    ago = _("%(seconds).0f s ago") % {"seconds": age}
    detail = last["error"] or (ago if ok else _("late: %(ago)s, expected every %(interval)s s") % {"ago": ago, "interval": interval})
    return {"ok": ok, "lastPass": last["at"], "intervalSeconds": interval, "detail": detail, "processes": beats}


def mcp_status() -> dict:
    """The MCP servers: a problem when an enabled server's last error is newer than its last
    successful listing (a server that crashed and came back is ok, its restarts counted)."""
    servers = [{k: v for k, v in s.items() if k != "server"} for s in mcp_server_states()]
    enabled = [s for s in servers if s["enabled"]]
    problems = [s for s in enabled if not s["ok"]]
    if not servers:
        detail = _("no MCP server configured")
    elif problems:
        detail = "; ".join(f"{s['name']}: {s['lastError'][:200]}" for s in problems)
    else:
        restarts = sum(s["restarts"] for s in enabled)
        detail = _("%(enabled)s enabled, %(tools)s tools") % {"enabled": len(enabled), "tools": sum(s["tools"] for s in enabled)}
        if restarts:
            detail += ", " + ngettext("%(n)s restart after crashes", "%(n)s restarts after crashes", restarts) % {"n": restarts}
    return {"ok": not problems, "detail": detail, "servers": servers}


def health_report(*, celery_timeout: float = CELERY_TIMEOUT) -> dict:
    """Every check; ``status`` is ``ok`` when all pass, else ``degraded`` (``down``: no database)."""
    db_ok, db_detail, db_ms = database_ok()
    report: dict = {"database": {"ok": db_ok, "detail": db_detail, "ms": round(db_ms, 1)}}
    report["connections"] = connection_budget() if db_ok else {"ok": False, "detail": _("database down")}
    report["channelLayer"] = channel_layer_status()
    report["celery"] = celery_status(timeout=celery_timeout) if db_ok else {"ok": False, "detail": _("database down")}
    sandbox = effective_sandbox()
    # Not ok: bwrap asked for but not working (every bash call fails), or auto fell back to none
    # (commands run unsandboxed). NETA_SANDBOX=none is a deliberate choice, reported as such.
    broken = sandbox.mode == "bwrap" and sandbox.reason not in ("configured", "bubblewrap works here")
    report["sandbox"] = {**sandbox.to_dict(), "ok": not (broken or sandbox.fell_back), "detail": sandbox.describe}
    report["reaper"] = reaper_status() if db_ok else {"ok": False, "detail": _("database down")}
    report["mcp"] = mcp_status() if db_ok else {"ok": False, "detail": _("database down")}
    if not db_ok:
        status = "down"
    else:
        status = "ok" if all(part["ok"] for part in report.values()) else "degraded"
    return {"status": status, "checkedAt": timezone.now().isoformat(), **report}
