"""Requests run their sync code on a fixed set of threads that keep their database connections
(``infra.http_threads``, ``infra.db_threads``), and the audit middleware runs on the event loop.

Driven through ``neta.asgi.application`` (the app Daphne serves), in-process.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.db.backends.signals import connection_created

from audit.models import AuditEntry
from infra.http_threads import PooledASGIHandler, _ExecutorPool
from runtime.api.tokens import api_token_create
from runtime.sessions.services import session_start
from tests.support.builders import default_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


class ConnectionsOpened:
    """Names of the threads that opened a database connection while it listens."""

    def __init__(self):
        self.threads: list[str] = []

    def __call__(self, sender, connection, **kwargs):
        self.threads.append(threading.current_thread().name)

    def __enter__(self):
        connection_created.connect(self, weak=False)
        return self

    def __exit__(self, *exc):
        connection_created.disconnect(self)


async def _get(app, path: str, headers=()) -> tuple[int, dict]:
    response = await HttpCommunicator(app, "GET", path, headers=[(b"host", b"127.0.0.1"), *headers]).get_response(timeout=10)
    return response["status"], dict(response["headers"])


async def test_requests_reuse_their_threads_and_database_connections():
    handler = PooledASGIHandler(threads=2)
    with ConnectionsOpened() as opened:
        for _ in range(20):
            status, _ = await _get(handler, "/api/health/")
            assert status == 200
    # One connection for the one thread sequential requests use; before, one per request.
    assert opened.threads == ["neta-http-1_0"]


async def test_concurrent_requests_use_at_most_the_configured_threads():
    handler = PooledASGIHandler(threads=3)
    with ConnectionsOpened() as opened:
        statuses = await asyncio.gather(*[_get(handler, "/api/health/") for _ in range(24)])
    assert {status for status, _ in statuses} == {200}
    assert len(opened.threads) == len(set(opened.threads)) <= 3
    assert set(opened.threads) <= {"neta-http-1_0", "neta-http-2_0", "neta-http-3_0"}
    assert handler.threads.busy() == 0


async def test_a_request_waits_for_a_free_thread_and_a_cancelled_wait_gives_it_back():
    pool = _ExecutorPool(1, "test-pool")
    first = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    cancelled = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    assert not waiting.done() and not cancelled.done()
    cancelled.cancel()
    pool.release(first)
    assert await waiting is first  # in order, the cancelled waiter skipped
    assert cancelled.cancelled()
    pool.release(first)
    assert await pool.acquire() is first  # nothing was lost: still the one executor
    first.shutdown()


@pytest.fixture
def agent(sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    return default_agent()


async def test_the_audit_middleware_on_the_event_loop_names_the_api_door_and_the_request_id(staff, owner, agent):
    from neta.asgi import application

    def setup():
        meta = session_start(agent=agent, user=owner)
        return meta.session_id, api_token_create(user=staff).secret

    session_id, secret = await sync_to_async(setup)()
    body = json.dumps({"title": "By staff"}).encode()
    communicator = HttpCommunicator(
        application, "PATCH", f"/api/sessions/{session_id}/", body=body,
        headers=[(b"host", b"127.0.0.1"), (b"authorization", f"Token {secret}".encode()), (b"x-request-id", b"req-async-1"),
                 (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    )  # fmt: skip
    response = await communicator.get_response(timeout=10)
    assert response["status"] == 200, response["body"]
    assert (b"X-Request-ID", b"req-async-1") in response["headers"]
    row = await sync_to_async(AuditEntry.objects.get)(action="session.rename")
    assert (row.action, row.via, row.request_id, row.actor_id) == ("session.rename", "api", "req-async-1", staff.pk)


async def test_a_celery_worker_thread_keeps_its_connection_between_tasks(settings):
    """Celery's Django fixup closes connections after each task unless they may be kept; the
    worker's task threads are marked to keep them (neta.celery: on worker_init for the threads
    and solo pools, on worker_process_init in each prefork child), a plain thread is not."""
    import celery.signals
    from django.db import close_old_connections, connection

    from neta.celery import _worker_child_setup, _worker_setup

    settings.NETA_GC_YOUNG = 0  # the handler also tunes the collector: not this test process's (tests/neta/test_gc_tuning.py)

    def after_a_task(mark: bool) -> bool:
        if mark:
            celery.signals.worker_process_init.send(sender=None)  # what a prefork child gets
        connection.ensure_connection()
        close_old_connections()  # what the fixup does after a task
        kept = connection.connection is not None
        connection.close()
        return kept

    def in_thread(mark: bool) -> bool:
        result = []
        thread = threading.Thread(target=lambda: result.append(after_a_task(mark)))
        thread.start()
        thread.join(10)
        return result[0]

    assert await asyncio.to_thread(in_thread, True) is True
    assert await asyncio.to_thread(in_thread, False) is False
    # -P threads / solo: the worker's own process runs the tasks; worker_init (sent with the
    # worker, which Celery's own fixup needs) sets it up the same way.
    assert any(receiver() is _worker_child_setup for _, receiver in celery.signals.worker_process_init.receivers)
    assert any(receiver() is _worker_setup for _, receiver in celery.signals.worker_init.receivers)


async def test_a_request_crosses_to_its_thread_a_few_times_not_once_per_middleware_half(monkeypatch):
    """The middleware chain runs synchronously with the view in one call on the request's
    thread; the rest are the request_started/finished signals' receivers. Django's async
    chain made ~14 crossings (each sync-only middleware's request and response halves)."""
    from concurrent.futures import ThreadPoolExecutor

    from infra import db_threads

    submits = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            submits.append(getattr(fn, "__qualname__", repr(fn)))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(db_threads, "executor", lambda name: Counting(max_workers=1, thread_name_prefix=name))
    handler = PooledASGIHandler(threads=1)
    status, headers = await _get(handler, "/api/health/", headers=[(b"x-request-id", b"hops-1")])
    assert status == 200
    assert headers.get(b"X-Frame-Options") == b"DENY"  # the outermost response half ran
    first = len(submits)
    status, _ = await _get(handler, "/api/nothing-here/")
    assert status == 404  # a 404 through the same chain (and logged by Django's handler)
    assert 1 <= first <= 4, submits
    assert len(submits) - first <= 4, submits[first:]
