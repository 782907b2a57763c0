"""A driver that runs prompts synchronously in this process (the inline backend's code path)."""

from __future__ import annotations

import threading
import time

from runtime.models import Agent, AgentRun
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start


class Driver:
    """Runs prompts synchronously in this process (the inline backend's code path)."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.session_id = session_start(agent=agent).session_id
        self.sink = InMemorySink()

    def prompt(self, text: str, *, cancel: threading.Event | None = None, **kwargs):
        outcome = session_prompt(session_id=self.session_id, text=text, dispatch=False, **{"actor": None, **kwargs})
        assert outcome.queued_as is None
        return execute_run(outcome.run.run_id, sink=self.sink, cancel=cancel)

    def start(self, text: str, **kwargs):
        """Run a prompt on a thread; returns (thread, holder) where holder[0] is the finished run."""
        outcome = session_prompt(session_id=self.session_id, text=text, dispatch=False, **{"actor": None, **kwargs})
        holder: list = []
        cancel = threading.Event()

        def work():
            from django.db import connection

            try:
                holder.append(execute_run(outcome.run.run_id, sink=self.sink, cancel=cancel))
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        thread.start()
        return thread, holder, outcome.run


def wait_status(run, status, timeout: float = 60.0):
    """Until ``run``'s row has ``status`` (a run another thread or process executes); the row."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = AgentRun.objects.get(pk=run.pk)
        if row.status == status:
            return row
        time.sleep(0.05)
    raise AssertionError(f"run {run.run_id} is {row.status}, not {status}: {row.error}")
