"""Transactions on the MariaDB backend (infra/mysql_backend): an atomic block is a ``BEGIN``
with the session left in autocommit, and it is a whole transaction all the same.

On a real MariaDB (``NETA_TEST_MYSQL_URL``), under the ``mysql`` alias; a second, raw
connection looks at what the first one's transaction holds.
"""

from __future__ import annotations

import MySQLdb
import pytest
from django.contrib.auth.models import Group
from django.db import connections, transaction

pytestmark = pytest.mark.django_db(databases=["default", "mysql"], transaction=True)


def _status(alias: str) -> dict[str, int]:
    """This connection's own counters of transaction statements."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_begin', 'Com_commit', 'Com_rollback', 'Com_set_option')")
        return {name: int(value) for name, value in cursor.fetchall()}


def _other(alias: str):
    """A raw connection of its own to the same test database."""
    params = connections[alias].get_connection_params()
    raw = MySQLdb.connect(**{k: v for k, v in params.items() if k in ("host", "port", "user", "passwd", "password", "database", "db", "charset")})
    raw.autocommit(True)
    return raw, raw.cursor()


def test_an_atomic_block_is_one_begin_and_one_commit_and_no_autocommit_switch(mysql_alias):
    _status(mysql_alias)  # the connection is open
    before = _status(mysql_alias)
    with transaction.atomic(using=mysql_alias):
        Group.objects.using(mysql_alias).create(name="one")
    after = _status(mysql_alias)
    spent = {name: after[name] - before[name] for name in before}
    assert spent == {"Com_begin": 1, "Com_commit": 1, "Com_rollback": 0, "Com_set_option": 0}, spent
    assert connections[mysql_alias].connection.get_autocommit()


def test_a_block_holds_its_locks_and_hides_its_writes_until_it_commits(mysql_alias):
    group = Group.objects.using(mysql_alias).create(name="locked")
    raw, other = _other(mysql_alias)
    try:
        with transaction.atomic(using=mysql_alias):
            Group.objects.using(mysql_alias).select_for_update().get(pk=group.pk)
            Group.objects.using(mysql_alias).create(name="unseen")
            # Under autocommit without the BEGIN the row lock would have ended with its statement.
            with pytest.raises(MySQLdb.OperationalError) as waited:
                other.execute("SELECT id FROM auth_group WHERE id = %s FOR UPDATE NOWAIT", [group.pk])
            assert waited.value.args[0] == 1205  # the row is locked (NOWAIT: at once, not after a wait)
            other.execute("SELECT COUNT(*) FROM auth_group WHERE name = 'unseen'")
            assert other.fetchone()[0] == 0
        other.execute("SELECT id FROM auth_group WHERE id = %s FOR UPDATE", [group.pk])
        assert other.fetchone()[0] == group.pk
        other.execute("SELECT COUNT(*) FROM auth_group WHERE name = 'unseen'")
        assert other.fetchone()[0] == 1
    finally:
        raw.close()


def test_a_failed_block_rolls_back_a_savepoint_keeps_the_outer_write_and_autocommit_returns(mysql_alias):
    groups = Group.objects.using(mysql_alias)
    with pytest.raises(ValueError), transaction.atomic(using=mysql_alias):
        groups.create(name="rolled back")
        raise ValueError("boom")
    assert not groups.filter(name="rolled back").exists()

    with transaction.atomic(using=mysql_alias):
        groups.create(name="outer")
        with pytest.raises(ValueError), transaction.atomic(using=mysql_alias):
            groups.create(name="inner")
            raise ValueError("boom")
    assert set(groups.filter(name__in=["outer", "inner"]).values_list("name", flat=True)) == {"outer"}

    # Outside a block every statement commits on its own: another connection sees it at once.
    groups.create(name="autocommitted")
    raw, other = _other(mysql_alias)
    try:
        other.execute("SELECT COUNT(*) FROM auth_group WHERE name = 'autocommitted'")
        assert other.fetchone()[0] == 1
    finally:
        raw.close()
