"""A driver that runs prompts synchronously in this process (the inline backend's code path)."""

from __future__ import annotations

import threading

from runtime.models import Agent
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
