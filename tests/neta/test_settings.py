"""Settings read NETA_* variables strictly: bad values are errors, not guesses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from neta.env import database_from_url, env_bool, env_choice, env_int, env_list, env_str
from tests.support.services import REPO


@pytest.mark.parametrize("value, expected", [("true", True), ("false", False), ("TRUE", True), (" false ", False)])
def test_env_bool_accepts_true_and_false(monkeypatch, value, expected):
    monkeypatch.setenv("NETA_X", value)
    assert env_bool("NETA_X", not expected) is expected


@pytest.mark.parametrize("value", ["yes", "1", "0", "on", "tru"])
def test_env_bool_rejects_anything_else(monkeypatch, value):
    monkeypatch.setenv("NETA_X", value)
    with pytest.raises(ImproperlyConfigured, match="NETA_X must be 'true' or 'false'"):
        env_bool("NETA_X", False)


def test_env_int_list_choice(monkeypatch):
    monkeypatch.setenv("NETA_N", "12")
    assert env_int("NETA_N", 1) == 12
    monkeypatch.setenv("NETA_N", "twelve")
    with pytest.raises(ImproperlyConfigured, match="integer"):
        env_int("NETA_N", 1)
    monkeypatch.setenv("NETA_N", "3")
    with pytest.raises(ImproperlyConfigured, match="at least 10"):
        env_int("NETA_N", 1, minimum=10)
    monkeypatch.setenv("NETA_L", "a, b,,c")
    assert env_list("NETA_L", []) == ["a", "b", "c"]
    monkeypatch.setenv("NETA_C", "celery")
    assert env_choice("NETA_C", "inline", ("inline", "celery")) == "celery"
    monkeypatch.setenv("NETA_C", "threads")
    with pytest.raises(ImproperlyConfigured, match="one of inline, celery"):
        env_choice("NETA_C", "inline", ("inline", "celery"))


def test_file_variant_for_secrets(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("NETA_SECRET_KEY_FILE", str(secret))
    assert env_str("NETA_SECRET_KEY") == "s3cret"
    monkeypatch.setenv("NETA_SECRET_KEY", "other")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_str("NETA_SECRET_KEY")


def test_database_urls(tmp_path):
    sqlite = database_from_url("sqlite:///var/x.sqlite3", base=tmp_path)
    assert sqlite["ENGINE"] == "infra.sqlite_backend" and sqlite["NAME"] == str(tmp_path / "var/x.sqlite3")
    mysql = database_from_url("mysql://root:p%40ss@127.0.0.1:3307/neta", base=tmp_path)
    assert (mysql["NAME"], mysql["USER"], mysql["PASSWORD"], mysql["PORT"]) == ("neta", "root", "p@ss", "3307")
    assert mysql["OPTIONS"]["charset"] == "utf8mb4"
    assert mysql["OPTIONS"]["isolation_level"] == "read committed"
    assert "STRICT_TRANS_TABLES" in mysql["OPTIONS"]["init_command"]
    with pytest.raises(ImproperlyConfigured, match="unsupported"):
        database_from_url("postgres://x/y", base=tmp_path)
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        database_from_url("mysql://root@127.0.0.1/", base=tmp_path)


def test_a_bad_variable_stops_start_up_with_its_name():
    env = {**os.environ, "NETA_DEBUG": "yes"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "NETA_DEBUG must be 'true' or 'false'" in result.stderr


@pytest.mark.django_db(databases="__all__")
def test_mysql_connection_uses_strict_mode_and_exact_binary_ids(mysql_alias):
    from django.db import connections

    with connections[mysql_alias].cursor() as cursor:
        cursor.execute("SELECT @@SESSION.sql_mode, @@SESSION.tx_isolation")
        sql_mode, isolation = cursor.fetchone()
        assert "STRICT_TRANS_TABLES" in sql_mode and isolation == "READ-COMMITTED"
        cursor.execute(
            "SELECT COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sessions_tree_sessionentry' AND COLUMN_NAME = 'entry_id'"
        )
        assert cursor.fetchone()[0] in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")  # binary and NO PAD


def test_redis_channel_layer_survives_idle_sockets_past_the_socket_timeout():
    """An idle socket's channel receive must not die of a Redis read timeout: with
    channels_redis' list layer (5 s BZPOPMIN) under redis-py 8's 5 s socket timeout every
    idle socket was closed with 1011. The deployed layer (pub/sub, polled) waits past
    its own socket timeout without an error, and still delivers afterwards (here the
    deployed configuration with a 2 s socket timeout, so that the wait past it is short)."""
    import redis

    url = os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception:
        pytest.skip("no Redis")
    code = (
        "import asyncio, django; django.setup()\n"
        "from channels.layers import get_channel_layer\n"
        "from django.conf import settings\n"
        "settings.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]['socket_timeout'] = 2\n"
        "async def main():\n"
        "    layer = get_channel_layer()\n"
        "    print(type(layer).__name__)\n"
        "    name = await layer.new_channel()\n"
        "    idle = settings.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]['socket_timeout'] + 1\n"
        "    receiving = asyncio.ensure_future(layer.receive(name))\n"
        "    done, _ = await asyncio.wait([receiving], timeout=idle)\n"
        "    assert not done, receiving.exception()\n"
        "    await layer.send(name, {'type': 'after.idle'})\n"
        "    message = await asyncio.wait_for(receiving, 5)\n"
        "    print('idle-ok' if message['type'] == 'after.idle' else message)\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "NETA_REDIS_URL": url, "NETA_CHANNELS_PREFIX": f"neta-settings-{os.getpid()}",
           "DJANGO_SETTINGS_MODULE": "neta.settings"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert "RedisFanoutLayer" in result.stdout, result.stderr[-2000:]
    assert "idle-ok" in result.stdout, result.stderr[-2000:]



def test_a_beat_reaper_round_expires_after_one_interval(monkeypatch):
    """A beat left running while no worker consumes must not pile rounds up: each message
    the beat sends carries an expiry of one interval (a worker drops it once expired)."""
    from celery.beat import Scheduler
    from django.conf import settings

    from neta.celery import app

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, *a, **options: sent.append((name, options)))
    scheduler = Scheduler(app, lazy=True)
    scheduler.merge_inplace(settings.CELERY_BEAT_SCHEDULE)
    scheduler.apply_async(scheduler.schedule["reap-stale-runs"], advance=False)

    (name, options), = sent
    assert name == "runtime.reap_stale_runs"
    assert options["expires"] == float(settings.NETA_REAPER_INTERVAL_SECONDS)
