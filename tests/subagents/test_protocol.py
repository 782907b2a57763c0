"""The JSONL protocol pieces: the writer's one-terminal rule, event checks, the bounded line reader."""

from __future__ import annotations

import io
import json

import pytest

from runtime.subagents.protocol import (
    EventWriter,
    LineReader,
    NoiseLog,
    MAX_LINE_BYTES,
    ProtocolError,
    TextParts,
    approval_response_message,
    check_event,
    check_host_message,
    decode_line,
    preview,
)


def test_writer_numbers_events_and_allows_one_terminal():
    out = io.BytesIO()
    writer = EventWriter(out, "run-1")
    writer.emit("run_start", agent="a")
    writer.emit("run_end", status="completed", finalText="ok", stopReason="stop")
    assert writer.emit("heartbeat", phase="model") is None  # after the end: dropped
    with pytest.raises(ProtocolError, match="already ended"):
        writer.emit("run_error", code="cancelled", message="late")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["seq"], e["type"], e["runId"], e["v"]) for e in lines] == [(1, "run_start", "run-1", 1), (2, "run_end", "run-1", 1)]
    last = 0
    for event in lines:
        last = check_event(event, run_id="run-1", last_seq=last)["seq"]


def test_a_terminal_text_over_the_line_limit_travels_in_parts_and_comes_back_whole():
    out = io.BytesIO()
    writer = EventWriter(out, "run-1")
    text = "长文本" * 400_000  # 1.2 M characters, 3.6 MB of UTF-8
    writer.emit("assistant_delta", turn=1, kind="text", delta=text)
    writer.emit("run_end", status="completed", finalText=text, stopReason="stop", usage={"totalTokens": 377_000})
    raw = out.getvalue().splitlines()
    assert max(len(line) for line in raw) < MAX_LINE_BYTES // 2
    events, last, parts = [], 0, TextParts()
    for line in raw:
        event = check_event(json.loads(line), run_id="run-1", last_seq=last)
        last = event["seq"]
        if event["type"] == "text_part":
            parts.add(event)
        else:
            events.append(parts.complete(event) if event["type"] == "run_end" else event)
    assert "".join(e["delta"] for e in events if e["type"] == "assistant_delta") == text
    end = events[-1]
    assert end["type"] == "run_end" and end["finalText"] == text and end["usage"] == {"totalTokens": 377_000} and "textParts" not in end


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"v": 2, "runId": "r", "seq": 1, "ts": 1, "type": "run_start"}, "event version 2"),
        ({"v": 1, "runId": "other", "seq": 1, "ts": 1, "type": "run_start"}, "expected 'r'"),
        ({"v": 1, "runId": "r", "seq": 0, "ts": 1, "type": "run_start"}, "seq must be an integer above 0"),
        ({"v": 1, "runId": "r", "seq": 1, "ts": 1, "type": "launch"}, "unknown event type 'launch'"),
        ({"v": 1, "runId": "r", "seq": 1, "ts": 1, "type": "run_end", "status": "done", "finalText": "", "stopReason": "stop"}, "run_end.status"),
        ({"v": 1, "runId": "r", "seq": 1, "ts": 1, "type": "run_error", "code": "oops", "message": ""}, "run_error.code"),
    ],
)
def test_bad_events_are_refused_with_a_reason(event, problem):
    with pytest.raises(ProtocolError, match=problem):
        check_event(event, run_id="r")


def test_line_reader_cuts_oversized_lines_and_keeps_going():
    reader = LineReader(max_line=10)
    got = reader.feed(b"short\n" + b"x" * 25)
    got += reader.feed(b"yyy\nafter\npart")
    assert got == [(b"short", False), (b"x" * 10, True), (b"after", False)]
    assert reader.close() == [(b"part", False)]


def test_decode_line_turns_garbage_into_reasons():
    assert decode_line(b"hello", oversized=False, run_id="r", last_seq=0)[1].startswith("not JSON")
    assert decode_line(b"[1]", oversized=False, run_id="r", last_seq=0)[1] == "an event is a JSON object, got list"
    event, problem = decode_line(b'{"v":1,"runId":"r","seq":3,"ts":5,"type":"run_start"}', oversized=False, run_id="r", last_seq=2)
    assert problem == "" and event["seq"] == 3


def test_noise_log_is_bounded_but_counts_everything():
    log = NoiseLog(keep=2)
    for i in range(5):
        log.add(b"junk %d" % i + b"z" * 1000, "not JSON")
    data = log.to_dict()
    assert data["count"] == 5 and len(data["kept"]) == 2
    assert data["kept"][0]["truncated"] is True and len(data["kept"][0]["line"]) == 500


def test_preview_keeps_head_and_tail():
    text = "a" * 3000 + "END"
    shown, truncated = preview(text, 300)
    assert truncated and shown.startswith("a" * 200) and shown.endswith("END") and "characters not shown" in shown
    assert preview("tiny") == ("tiny", False)


def test_host_messages_are_checked():
    assert check_host_message({"v": 1, "type": "cancel"})["type"] == "cancel"
    with pytest.raises(ProtocolError, match="cancel.reason"):
        check_host_message({"v": 1, "type": "cancel", "reason": "because"})
    with pytest.raises(ProtocolError, match="proxy_response.result"):
        check_host_message({"v": 1, "type": "proxy_response", "requestId": "x", "result": {}})


def test_an_approval_travels_as_a_request_event_and_a_response_message():
    out = io.BytesIO()
    writer = EventWriter(out, "run-1")
    event = writer.emit("approval_request", requestId="q1", toolCallId="c1", name="bash", request={"command": "make"})
    assert check_event(json.loads(out.getvalue()), run_id="run-1") == event
    with pytest.raises(ProtocolError, match="approval_request.request"):
        check_event({**event, "seq": 2, "request": "make"}, run_id="run-1", last_seq=1)
    assert check_event({**event, "type": "heartbeat", "phase": "approval", "seq": 3}, last_seq=2)["phase"] == "approval"
    allow = approval_response_message("q1", decision="allow", scope="session", prefix="make")
    assert check_host_message(allow) == {"v": 1, "type": "approval_response", "requestId": "q1", "decision": "allow", "text": "", "scope": "session", "prefix": "make"}
    with pytest.raises(ProtocolError, match="approval_response.decision"):
        check_host_message({**allow, "decision": "maybe"})
    with pytest.raises(ProtocolError, match="scope is once or session"):
        check_host_message({**allow, "scope": "forever"})
    with pytest.raises(ProtocolError, match="approval_response.requestId"):
        check_host_message({**allow, "requestId": ""})
