"""Provider fixtures: every contract test runs on the file provider, the mysql
provider on SQLite, and the mysql provider on the real MariaDB server."""

from __future__ import annotations

import os

import pytest

from sessions_tree.index import INDEXES
from sessions_tree.providers import get_provider
from tests.conftest import require

PROVIDERS = ["file", "mysql-sqlite", "mysql-mariadb"]


def appender_env(settings) -> dict:
    """The environment of an ``appender.py`` child: this test's SQLite database and sessions folder."""
    db = settings.DATABASES["default"]
    assert "sqlite" in db["ENGINE"], "appender children share the SQLite test database"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "neta.settings",
        "NETA_DATABASE_URL": f"sqlite:///{db['NAME']}",
        "NETA_SESSIONS_DIR": str(settings.NETA_SESSIONS_DIR),
        "NETA_EVENT_LOG_SIZE": "100000",
    }
    env.pop("NETA_TEST_MYSQL_URL", None)
    return env


def forget_process_caches() -> None:
    """What a new process would start from: no in-memory indexes."""
    INDEXES.clear()


@pytest.fixture(params=PROVIDERS)
def provider(request, sessions_dir, settings):
    kind, _, database = request.param.partition("-")
    using = "default"
    if database == "mariadb":
        require("mysql" in settings.DATABASES, "NETA_TEST_MYSQL_URL is not set (no MariaDB/MySQL server)")
        using = "mysql"
    forget_process_caches()
    yield get_provider(kind, using=using)
    forget_process_caches()


def user_message(text: str, ts: int = 1_700_000_000_000) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant_message(text: str, *, ts: int = 1_700_000_000_500, tool_calls=(), stop_reason: str | None = None) -> dict:
    content = [{"type": "text", "text": text}] if text else []
    for call_id, name, arguments in tool_calls:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
    return {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-test",
        "usage": {
            "input": 10,
            "output": 5,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 15,
            "cost": {"input": 0.00003, "output": 0.000075, "cacheRead": 0, "cacheWrite": 0, "total": 0.000105},
        },
        "stopReason": stop_reason or ("toolUse" if tool_calls else "stop"),
        "timestamp": ts,
    }


def tool_result(call_id: str, name: str, text: str, ts: int = 1_700_000_001_000) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": ts,
    }
