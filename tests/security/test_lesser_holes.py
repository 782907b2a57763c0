"""The lesser holes: a parent cycle imported, a refused megabyte argument, invisible text taken
for text, an over-long request line."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from twisted.internet.testing import StringTransport
from twisted.web.http import HTTPChannel

from neta.serve import install_long_line_answers
from runtime.models import Agent, ModelConfig, RunStatus
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from sessions_tree.providers import provider_for_session
from toolcatalog.protocol import ToolContext, get_tool, run_tool

from .security_support import logged_in

pytestmark = pytest.mark.django_db


def line(entry: dict) -> str:
    return json.dumps(entry, separators=(",", ":"))


def message(entry_id: str, parent: str | None, role: str, text: str) -> str:
    body = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1700000000000}
    if role == "assistant":
        body.update(api="x", provider="x", model="x", stopReason="stop", usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    return line({"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": body})


@pytest.fixture
def agent(tmp_path, settings):
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="s", options={"rules": {"version": 1, "delay_ms": 0, "default": {"reply": [{"text": "still here"}]}}})
    return Agent.objects.create(name="default", model=model)


def test_a_file_whose_last_entry_is_on_a_parent_cycle_imports_and_takes_prompts(agent, account):
    user = account("importer", staff=False)
    text = "\n".join([
        line({"type": "session", "version": 3, "id": "0199a0a0-0000-7000-8000-00000000c1c1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}),
        message("u1", None, "user", "first"),
        message("a1", "u1", "assistant", "an answer"),
        message("u2", "u3", "user", "looped"),
        message("u3", "u2", "user", "looped too"),
    ]) + "\n"  # fmt: skip
    answer = logged_in(user).post("/api/sessions/import/", {"file": SimpleUploadedFile("cycle.jsonl", text.encode())})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    report = body["import"]
    assert report["cycles"] and report["leafMoved"] == {"from": "u3", "to": "a1", "why": "the last entry's path runs into a parent cycle"}
    session_id = body["sessionId"]
    assert body["leafEntryId"] == "a1"
    outcome = session_prompt(session_id=session_id, text="go on", dispatch=False, actor=user)
    run = execute_run(outcome.run.run_id, sink=InMemorySink())
    assert run.status == RunStatus.COMPLETED, run.error
    context = provider_for_session(session_id).build_context(session_id).messages
    assert [m["content"][0]["text"] for m in context] == ["first", "an answer", "go on", "still here"]
    assert len(provider_for_session(session_id).list_entries(session_id)) == 6  # the cyclic entries kept, as written


def todo(items) -> str:
    import tempfile

    result = run_tool(get_tool("todo"), ToolContext(roots=(tempfile.gettempdir(),), sandbox="none"), {"todos": items})
    assert result.is_error
    return result.content[0]["text"]


@pytest.mark.parametrize("content", ["\u200b", "\u200b\u200c\u200d\ufeff", "\u2060\u00ad", "\u3164", "\u2800 \u200b", "\u202e\u202c"])
def test_invisible_text_is_blank(content):
    assert "must not be blank" in todo([{"content": content, "status": "pending"}])


def test_a_refused_megabyte_argument_comes_back_short():
    text = todo([{"content": "x" * 1_000_000, "status": "pending"}])
    assert "is too long" in text and len(text) < 2000
    many = todo([{"content": "", "status": "nope"} for _ in range(200)])
    assert "more" in many and len(many) < 20_000


@pytest.mark.parametrize(("request_bytes", "status", "api"), [
    (b"GET /api/sessions/?q=" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414", True),
    (b"GET /chat?q=" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414", False),
    (b"GET /api/health/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n", b"431", True),
    (b"GET /api/health/ HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"c" * 1000) for i in range(20)) + b"\r\n", b"431", True),
])  # fmt: skip
def test_an_over_long_request_line_or_headers_get_an_answer(request_bytes, status, api):
    """Twisted (under Daphne) dropped the connection without a word; the answer is 414/431,
    the API's JSON error for /api/."""
    install_long_line_answers()
    channel = HTTPChannel()
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(request_bytes)
    written = transport.value()
    assert written.startswith(b"HTTP/1.1 " + status), written[:80]
    head, body = written.split(b"\r\n\r\n", 1)
    if api:
        assert json.loads(body)["error"]["code"] in ("uri_too_long", "headers_too_large")
    else:
        assert body.startswith(status)
    assert transport.disconnecting
