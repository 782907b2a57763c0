"""The threads that open model streams (runtime/llm/pump.py): kept for the next call, one more
only while the others are busy, each call in a context of its own; an abort wakes a caller
that waits for the response's head."""

from __future__ import annotations

import contextvars
import threading
import time

from runtime.llm import pump
from runtime.llm.pump import Cancelled, Pump

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def _idle(openers: pump._Openers, count: int) -> None:
    """Wait until ``count`` threads are back waiting for a call (a thread counts itself idle
    just after its call returns)."""
    deadline = time.monotonic() + 5
    while openers._idle != count:
        assert time.monotonic() < deadline, f"{openers._idle} idle threads, not {count}"
        time.sleep(0.001)


def _run(openers: pump._Openers, call) -> None:
    """``call`` on one of the threads, then back to waiting for the next."""
    idle = openers._idle
    openers.submit(call)
    _idle(openers, max(idle, 1))


def test_calls_one_after_another_run_on_one_kept_thread_each_in_a_fresh_context():
    openers = pump._Openers()
    seen = []

    def call():
        seen.append((threading.get_ident(), threading.current_thread().name, MARK.get()))
        MARK.set("left behind by the call before")

    for _ in range(5):
        _run(openers, call)
    assert len({ident for ident, _, _ in seen}) == 1
    assert {name for _, name, _ in seen} == {"neta-llm-open"}
    assert {mark for _, _, mark in seen} == {"unset"}


def test_a_call_held_by_its_server_keeps_its_thread_and_the_next_call_gets_another():
    openers = pump._Openers()
    release, holding = threading.Event(), threading.Event()
    idents = []

    def held():
        idents.append(threading.get_ident())
        holding.set()
        release.wait(5)

    openers.submit(held)
    assert holding.wait(5)
    _run(openers, lambda: idents.append(threading.get_ident()))  # done while the first still holds
    assert not release.is_set()
    release.set()
    _idle(openers, 2)
    assert len(set(idents)) == 2


def test_a_thread_left_without_work_ends(monkeypatch):
    monkeypatch.setattr(pump, "IDLE_SECONDS", 0.2)
    openers = pump._Openers()
    threads = []
    _run(openers, lambda: threads.append(threading.current_thread()))
    threads[0].join(5)  # ends after IDLE_SECONDS without a call
    assert not threads[0].is_alive()
    assert openers._idle == 0
    _run(openers, lambda: threads.append(threading.current_thread()))  # a new one starts
    assert threads[1] is not threads[0]


def test_a_call_that_raises_outside_its_pump_leaves_the_thread_serving():
    openers = pump._Openers()
    idents = []

    def broken():
        idents.append(threading.get_ident())
        raise RuntimeError("boom")

    _run(openers, broken)
    _run(openers, lambda: idents.append(threading.get_ident()))
    assert len(idents) == 2
    assert len(set(idents)) == 1


def test_an_abort_wakes_the_caller_waiting_for_the_head():
    release = threading.Event()

    def open_stream():
        release.wait(10)  # a server that does not answer
        return iter(())

    cancel = threading.Event()
    started = time.monotonic()
    threading.Timer(0.2, cancel.set).start()
    items = Pump(open_stream).items(cancel)
    try:
        next(items)
        raise AssertionError("the wait ended without an abort")
    except Cancelled:
        waited = time.monotonic() - started
    finally:
        release.set()
    assert waited < 5  # woken by the abort, not by the server


def test_the_head_and_the_events_reach_the_caller_in_order():
    cancel = threading.Event()
    assert list(Pump(lambda: iter(["a", "b"])).items(cancel)) == [pump.OPENED, "a", "b"]
    assert list(Pump(lambda: iter(["c"])).items(None)) == [pump.OPENED, "c"]


def test_an_error_of_the_call_reaches_the_caller():
    def failing():
        raise ConnectionError("refused")

    for cancel in (threading.Event(), None):
        items = Pump(failing).items(cancel)
        try:
            next(items)
            raise AssertionError("no error")
        except ConnectionError as exc:
            assert str(exc) == "refused"
