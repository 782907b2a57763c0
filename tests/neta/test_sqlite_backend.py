"""The SQLite backend's writer queue (infra/sqlite_backend): the threads of one process that
open a transaction queue on one lock per database file, held from ``BEGIN IMMEDIATE`` to
the commit or rollback, so the next writer starts when the lock is released instead of
sleeping in SQLite's busy handler."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from infra.sqlite_backend.base import _queue

pytestmark = pytest.mark.django_db(transaction=True)


def queue():
    return _queue(str(connection.settings_dict["NAME"]))


def test_a_transaction_holds_the_queue_until_its_commit_or_rollback():
    assert connection.vendor == "sqlite" and not queue().locked()
    with transaction.atomic():
        get_user_model().objects.create_user("queued-a")
        assert queue().locked()
    assert not queue().locked()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        get_user_model().objects.create_user("queued-b")
        assert queue().locked()
        1 / 0  # noqa: B018 - the rollback path
    assert not queue().locked()
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["queued-a"]
    get_user_model().objects.filter(username="queued-a").update(first_name="x")  # autocommit: not queued
    assert not queue().locked()


def test_a_second_thread_writes_once_the_first_committed():
    inside, go_on, order = threading.Event(), threading.Event(), []

    def first():
        try:
            with transaction.atomic():
                get_user_model().objects.create_user("first")
                inside.set()
                assert go_on.wait(20)
                order.append("first commits")
        finally:
            connection.close()

    def second():
        try:
            assert inside.wait(20)
            with transaction.atomic():
                order.append("second begins")
                get_user_model().objects.create_user("second")
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert inside.wait(20) and queue().locked()
    assert "second begins" not in order
    go_on.set()
    for thread in threads:
        thread.join(20)
    assert order == ["first commits", "second begins"] and not queue().locked()
    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["first", "second"]


def test_statements_are_converted_once_and_the_memory_of_them_stays_bounded(monkeypatch):
    """Cursors remember each statement's SQLite form (``%s`` → ``?``, ``%%`` → ``%``):
    the same rows come back the second time, from the remembered form, and a process
    running ever-new statement texts empties the memory instead of growing it."""
    from infra.sqlite_backend import base as backend

    backend._converted.clear()
    get_user_model().objects.create_user("percent%user")
    sql = "SELECT username FROM auth_user WHERE username LIKE %s AND username LIKE '%%user'"
    for _ in range(2):
        with connection.cursor() as cursor:
            cursor.execute(sql, ["percent%"])
            assert cursor.fetchall() == [("percent%user",)]
    assert backend._converted[sql] == "SELECT username FROM auth_user WHERE username LIKE ? AND username LIKE '%user'"
    with connection.cursor() as cursor:  # named parameters are not remembered (their names shape the text)
        cursor.execute("SELECT %(a)s + %(b)s", {"a": 1, "b": 2})
        assert cursor.fetchone() == (3,)
    assert "SELECT %(a)s + %(b)s" not in backend._converted
    monkeypatch.setattr(backend, "_CONVERTED_MAX", 5)
    with connection.cursor() as cursor:
        for n in range(12):
            cursor.execute(f"SELECT %s + {n}", [1])
            assert cursor.fetchone() == (1 + n,)
    assert 0 < len(backend._converted) <= 5
