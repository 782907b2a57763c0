"""Pi-shaped messages for building sessions in tests, and what a fresh process starts from."""

from __future__ import annotations

import os
from pathlib import Path

from sessions_tree.index import INDEXES


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


def pi_view_of_file(path: Path, leaf, canonical: bool) -> bytes:
    """Neta's rendering of a session file as Pi's oracle prints it (``oracle context``)."""
    from sessions_tree.jsonl import dumps_pretty, parse_session_text
    from sessions_tree.migration import migrate_to_current
    from sessions_tree.pi_view import session_view

    parsed = parse_session_text(path.read_bytes().decode("utf-8", errors="replace"))
    assert parsed.header is not None, parsed.header_error
    header, entries, _ = migrate_to_current(parsed.header, parsed.entries, positions=parsed.positions)
    view = session_view(header, entries, leaf, file_version=parsed.file_version, canonical_ids=canonical)
    return dumps_pretty(view).encode("utf-8")
