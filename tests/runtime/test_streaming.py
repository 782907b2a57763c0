"""Coalescing of streaming deltas: fewer messages, same text, order kept."""

from __future__ import annotations

from runtime.realtime.sinks import Coalescer, InMemorySink


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_deltas_are_merged_up_to_the_rate_and_nothing_is_lost():
    sink, clock = InMemorySink(), FakeClock()
    coalescer = Coalescer(sink, "s1", rate=20, clock=clock)
    coalescer.emit({"type": "assistant_stream_start", "entryId": "e1"})
    text = ""
    for i in range(1000):  # 1000 deltas over one second
        clock.now = i / 1000
        piece = f"{i},"
        text += piece
        coalescer.emit({"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": 0, "kind": "text", "delta": piece})
    coalescer.emit({"type": "assistant_stream_end", "entryId": "e1"})
    deltas = sink.of_type("assistant_stream_delta")
    assert "".join(d["delta"] for d in deltas) == text
    assert len(deltas) <= 22  # ≈ 20 per second, plus the final flush
    kinds = [e["type"] for _, e in sink.events]
    assert kinds[0] == "assistant_stream_start" and kinds[-1] == "assistant_stream_end"


def test_a_different_stream_or_event_flushes_first():
    sink, clock = InMemorySink(), FakeClock()
    coalescer = Coalescer(sink, "s1", rate=1, clock=clock)
    clock.now = 10

    def delta(index, kind, text):
        coalescer.emit({"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": index, "kind": kind, "delta": text})

    delta(0, "thinking", "a")  # first delta goes out at once
    delta(0, "thinking", "b")  # held …
    delta(0, "thinking", "b2")  # … and merged
    delta(1, "text", "c")  # another stream: flushes "bb2" first
    coalescer.emit({"type": "tool_call_started", "entryId": "e1", "contentIndex": 2})
    events = [e for _, e in sink.events]
    assert [(e["type"], e.get("delta")) for e in events] == [
        ("assistant_stream_delta", "a"),
        ("assistant_stream_delta", "bb2"),
        ("assistant_stream_delta", "c"),
        ("tool_call_started", None),
    ]
