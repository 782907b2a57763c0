"""Coalescing of streaming deltas: fewer messages, same text, order kept."""

from __future__ import annotations

import pytest

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


def _stream(coalescer, clock, seconds: float, per_second: int, entry: str = "e1") -> str:
    text = ""
    for i in range(int(seconds * per_second)):
        clock.now = i / per_second
        piece = f"{entry}:{i},"
        text += piece
        coalescer.emit({"type": "assistant_stream_delta", "entryId": entry, "contentIndex": 0, "kind": "text", "delta": piece})
    coalescer.flush()
    return text


def test_a_shared_budget_spreads_fewer_messages_over_many_streams_with_the_same_text():
    from runtime.realtime.sinks import StreamBudget

    clock = FakeClock()
    budget = StreamBudget(100)
    # 30 other streams sent a delta within the last second: 31 share 100 messages a second
    for other in range(30):
        budget.interval(10_000 + other, 0.0)
    sink = InMemorySink()
    coalescer = Coalescer(sink, "s1", rate=20, budget=budget, clock=clock)
    for other in range(30):  # they keep streaming (each notes itself once per flush)
        budget.interval(10_000 + other, 0.5)
    text = _stream(coalescer, clock, 1.0, 1000)
    deltas = sink.of_type("assistant_stream_delta")
    assert "".join(d["delta"] for d in deltas) == text
    # at most one per 0.31 s after the first: 1 + 3 + the final flush, not 20
    assert 3 <= len(deltas) <= 5
    assert budget.streams() == 31
    # The model's events may gather as long as the budget holds the stream back (0.31 s):
    # reading more often would only wake the thread for nothing.
    assert coalescer.read_pace() == pytest.approx(0.31)
    # With more streams than the budget sends on in a second, at most MAX_READ_PACE (what
    # the end of a model call may wait to be read).
    clock.now += 1.0
    for other in range(100):
        budget.interval(20_000 + other, clock())
    clock.now += 0.3  # the budget counts its streams again
    coalescer.emit({"type": "assistant_stream_delta", "entryId": "x", "contentIndex": 0, "kind": "text", "delta": "y"})
    assert coalescer.read_pace() == Coalescer.MAX_READ_PACE == 1.0


def test_the_read_pace_is_the_budgets_interval_and_none_while_a_stream_keeps_its_own_rate():
    from runtime.realtime.sinks import StreamBudget

    clock = FakeClock()
    budget = StreamBudget(100)
    sink = InMemorySink()
    coalescer = Coalescer(sink, "s1", rate=20, budget=budget, clock=clock)
    _stream(coalescer, clock, 1.0, 100)
    assert coalescer.read_pace() == 0.0  # alone: its own 20 a second, events read as they come
    for other in range(9):  # ten streams share 100 a second: one every 0.1 s each
        budget.interval(10_000 + other, clock.now)
    clock.now += 0.3
    coalescer.emit({"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": 0, "kind": "text", "delta": "x"})
    assert abs(coalescer.read_pace() - 0.1) < 1e-9


def test_a_lone_stream_keeps_its_rate_and_the_budget_forgets_idle_streams():
    from runtime.realtime.sinks import StreamBudget

    clock = FakeClock()
    budget = StreamBudget(100)
    for other in range(30):
        budget.interval(10_000 + other, 0.0)
    clock.now = 5.0  # a while later: the others stopped streaming
    sink = InMemorySink()
    coalescer = Coalescer(sink, "s1", rate=20, budget=budget, clock=clock)
    start = 5.0

    text = ""
    for i in range(1000):
        clock.now = start + i / 1000
        text += f"{i},"
        coalescer.emit({"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": 0, "kind": "text", "delta": f"{i},"})
    coalescer.flush()
    deltas = sink.of_type("assistant_stream_delta")
    assert "".join(d["delta"] for d in deltas) == text
    assert 18 <= len(deltas) <= 22  # its own 20 a second
    assert budget.streams() == 1


def test_no_budget_means_each_stream_keeps_its_rate():
    from runtime.realtime.sinks import StreamBudget

    clock = FakeClock()
    budget = StreamBudget(0)
    for other in range(500):
        budget.interval(other, 0.0)
    sink = InMemorySink()
    coalescer = Coalescer(sink, "s1", rate=20, budget=budget, clock=clock)
    text = _stream(coalescer, clock, 1.0, 1000)
    deltas = sink.of_type("assistant_stream_delta")
    assert "".join(d["delta"] for d in deltas) == text and 18 <= len(deltas) <= 22
