"""Runtime fixtures: a scripted model whose rules each test sets, an agent, a session."""

from __future__ import annotations

import threading

import pytest

from runtime.models import Agent, ModelConfig
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.index import INDEXES

SUMMARY_SYSTEM = "context summarization assistant"


def rules(*rules_list, default=None) -> dict:
    return {
        "version": 1,
        "chunk_size": 4,
        "delay_ms": 0,
        "rules": list(rules_list),
        "default": default or {"reply": [{"text": "echo: {{user}}"}]},
    }


def summary_rule(text: str = "## Goal\nSummarized.") -> dict:
    return {"match": {"system": SUMMARY_SYSTEM}, "reply": [{"text": text}]}


@pytest.fixture
def workspace(tmp_path, settings):
    path = tmp_path / "workspace"
    path.mkdir()
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = path
    INDEXES.clear()
    return path


@pytest.fixture
def make_agent(workspace):
    def make(script: dict, *, name="tester", provider="file", **fields) -> Agent:
        model = ModelConfig.objects.create(
            name=f"{name}-model",
            provider_kind="scripted",
            provider_name="scripted",
            model_id="scripted-test",
            context_window=fields.pop("context_window", 100000),
            price_input=1,
            price_output=2,
            supports_thinking=True,
            options={"rules": script},
        )
        return Agent.objects.create(name=name, model=model, cwd=str(workspace), session_provider=provider, **fields)

    return make


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


@pytest.fixture
def driver_for(make_agent):
    def make(script: dict, **fields) -> Driver:
        return Driver(make_agent(script, **fields))

    return make
