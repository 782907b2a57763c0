"""Prepared statements (``infra.prepared``) read and write what the ORM would, on
SQLite and on the real MariaDB server, compiling each shape once per connection."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connections, transaction
from django.db.models import Count, Exists, OuterRef
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_tree.models import AgentSession, SessionEvent
from infra import prepared
from infra.prepared import Increment, P, Prepared, insert, update_rows

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture(params=["default", "mysql"])
def using(request):
    if request.param == "mysql":
        return request.getfixturevalue("mysql_alias")
    return "default"


def _session(using: str, sid: str, **fields) -> AgentSession:
    return AgentSession.objects.using(using).create(session_id=sid, header="{}", **fields)


BY_ID = Prepared(lambda: AgentSession.objects.filter(session_id=P("sid")).order_by("pk")[:1])
WITH_USER = Prepared(
    lambda: AgentSession.objects.select_related("user")
    .annotate(n_events=Count("events"))
    .filter(agent=P("agent"))
    .order_by("session_id")
)
FLAGS = Prepared(
    lambda: AgentSession.objects.filter(pk=P("pk"))
    .annotate(has_events=Exists(SessionEvent.objects.filter(session=OuterRef("pk"), type="x")))
    .values_list("has_events", "revision")[:1]
)
KEYS = Prepared(lambda: AgentSession.objects.filter(agent=P("agent")).order_by("pk").values_list("pk", flat=True))
LOCKED = Prepared(lambda: AgentSession.objects.select_for_update().filter(pk=P("pk")).values_list("session_id", flat=True)[:1])


def test_a_select_yields_the_instances_the_orm_would(using, django_user_model):
    user = django_user_model.objects.db_manager(using).create_user("ann")
    _session(using, "s-1", agent="a", user=user, metadata={"k": [1, 2]}, title="one")
    _session(using, "s-2", agent="a")
    _session(using, "s-3", agent="b")
    SessionEvent.objects.using(using).create(session=AgentSession.objects.using(using).get(session_id="s-1"), revision=1, type="t", payload="{}")

    got = WITH_USER.all(using=using, agent="a")
    orm = list(AgentSession.objects.using(using).select_related("user").annotate(n_events=Count("events")).filter(agent="a").order_by("session_id"))
    assert [s.session_id for s in got] == ["s-1", "s-2"]
    for mine, theirs in zip(got, orm, strict=True):
        assert {f.attname: getattr(mine, f.attname) for f in AgentSession._meta.concrete_fields} == {
            f.attname: getattr(theirs, f.attname) for f in AgentSession._meta.concrete_fields
        }
        assert mine.n_events == theirs.n_events
        assert mine._state.db == using and not mine._state.adding
    assert got[0].metadata == {"k": [1, 2]} and isinstance(got[0].created_at, dt.datetime) and got[0].created_at.tzinfo
    assert got[0].user.username == "ann" and got[1].user is None  # select_related filled without a query
    assert BY_ID.first(using=using, sid="s-3").agent == "b"
    assert BY_ID.first(using=using, sid="nope") is None


def test_values_list_rows_come_in_the_order_asked_for(using):
    meta = _session(using, "s-1", agent="a", revision=7)
    SessionEvent.objects.using(using).create(session=meta, revision=1, type="x", payload="{}")
    assert FLAGS.first(using=using, pk=meta.pk) == (True, 7)
    assert FLAGS.first(using=using, pk=meta.pk) == tuple(
        AgentSession.objects.using(using).filter(pk=meta.pk)
        .annotate(has_events=Exists(SessionEvent.objects.filter(session=OuterRef("pk"), type="x")))
        .values_list("has_events", "revision")[0]
    )  # fmt: skip
    other = _session(using, "s-2", agent="a")
    assert KEYS.all(using=using, agent="a") == [meta.pk, other.pk]
    with transaction.atomic(using=using):
        assert LOCKED.first(using=using, pk=other.pk) == "s-2"


def test_each_shape_compiles_once_per_database_and_every_call_is_one_logged_query(using):
    _session(using, "s-1")
    connection = connections[using]
    BY_ID.first(using=using, sid="s-1")
    compiled = dict(prepared._COMPILED)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            assert BY_ID.first(using=using, sid="s-1") is not None
    assert len(queries) == 3 and all("session_id" in q["sql"] for q in queries)
    assert prepared._COMPILED == compiled  # kept for the process (every thread's connection), not compiled again


def test_a_missing_value_is_a_clear_error(using):
    with pytest.raises(TypeError, match="needs a value for 'sid'"):
        BY_ID.first(using=using)


def test_update_rows_matches_the_orm_update(using):
    meta = _session(using, "s-1", revision=3, last_seq=10, metadata={"a": 1})
    assert meta.in_flight_entry_id is None
    # None in a filter is IS NULL (as in the ORM), a tuple an IN list, the rest is bound.
    changed = update_rows(
        AgentSession,
        {"pk": meta.pk, "revision": 3, "in_flight_entry_id": None, "status__in": ("active", "archived")},
        {"revision": 4, "in_flight_entry_id": "e1", "metadata": {"b": [2]}, "last_seq": Increment(5), "title": "t"},
        using=using,
    )
    assert changed == 1
    row = AgentSession.objects.using(using).get(pk=meta.pk)
    assert (row.revision, row.in_flight_entry_id, row.metadata, row.last_seq, row.title) == (4, "e1", {"b": [2]}, 15, "t")
    # A condition that no longer holds changes nothing (the same shape, other values).
    assert update_rows(AgentSession, {"pk": meta.pk, "revision": 3, "in_flight_entry_id": None, "status__in": ("active", "archived")},
                       {"revision": 5, "in_flight_entry_id": "e2", "metadata": {}, "last_seq": Increment(1), "title": ""}, using=using) == 0  # fmt: skip
    # Back to NULL, and a datetime written as the ORM writes it.
    when = timezone.now() - dt.timedelta(days=1)
    assert update_rows(AgentSession, {"pk": meta.pk, "in_flight_entry_id": "e1"}, {"in_flight_entry_id": None, "updated_at": when}, using=using) == 1
    row = AgentSession.objects.using(using).get(pk=meta.pk)
    assert row.in_flight_entry_id is None and abs(row.updated_at - when) < dt.timedelta(seconds=1)
    assert AgentSession.objects.using(using).filter(pk=meta.pk, updated_at=when).exists()


def test_insert_writes_rows_as_save_would(using, django_user_model):
    user = django_user_model.objects.db_manager(using).create_user("ann")
    meta = AgentSession(session_id="s-new", header="{}", metadata={"x": 1}, user=user)
    insert([meta], using=using)
    assert meta.pk is not None and meta._state.db == using and not meta._state.adding
    row = AgentSession.objects.using(using).get(pk=meta.pk)
    assert (row.session_id, row.metadata, row.user_id, row.status) == ("s-new", {"x": 1}, user.pk, "active")
    assert row.created_at is not None and row.created_at == meta.created_at  # auto_now_add ran
    events = [SessionEvent(session_id=meta.pk, revision=r, type="t", payload="{}", actor_id=user.pk) for r in (1, 2, 3)]
    insert(events, using=using)
    assert list(SessionEvent.objects.using(using).filter(session=meta).values_list("revision", "actor_id")) == [(1, user.pk), (2, user.pk), (3, user.pk)]


def test_insert_takes_more_rows_than_one_statement_holds_and_can_leave_out_stored_ones(using):
    """Rows past the database's parameters a statement (SQLite's 999) go in further statements;
    ``ignore_conflicts`` leaves out a row whose unique value is stored already; no transaction
    is opened around the statements."""
    meta = _session(using, "s-many")
    connection = connections[using]
    per_statement = connection.ops.bulk_batch_size(SessionEvent._meta.concrete_fields, [None] * 5000)
    count = min(per_statement, 2000) + 7  # at least two statements where there is a limit
    with CaptureQueriesContext(connection) as captured:
        insert([SessionEvent(session_id=meta.pk, revision=r, type="t", payload="{}") for r in range(1, count + 1)], using=using)
    sql = [q["sql"] for q in captured.captured_queries]
    assert not [s for s in sql if s.upper().startswith(("BEGIN", "SAVEPOINT", "COMMIT"))]
    assert len(sql) == (2 if per_statement < count else 1)
    assert SessionEvent.objects.using(using).filter(session=meta).count() == count
    again = [SessionEvent(session_id=meta.pk, revision=r, type="again", payload="{}") for r in (count, count + 1)]
    insert(again, using=using, ignore_conflicts=True)  # (session, revision) is unique: the first is left out
    stored = dict(SessionEvent.objects.using(using).filter(session=meta, revision__gte=count).values_list("revision", "type"))
    assert stored == {count: "t", count + 1: "again"}


def test_update_rows_refuses_a_list_where_its_shape_needs_a_tuple(using):
    meta = _session(using, "s-1")
    with pytest.raises(TypeError, match="give a tuple"):
        update_rows(AgentSession, {"pk": meta.pk, "status__in": ["active"]}, {"title": "t"}, using=using)
    assert AgentSession.objects.using(using).get(pk=meta.pk).title == ""
