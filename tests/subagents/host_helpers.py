"""Building parents and children for the host tests: scripted models, agents, a driver."""

from __future__ import annotations

import os
import threading
import time

from runtime.models import Agent, ModelConfig
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.providers import provider_for_session


def script(*rules, default=None) -> dict:
    return {"version": 1, "chunk_size": 8, "delay_ms": 0, "rules": list(rules), "default": default or {"reply": [{"text": "echo: {{user}}"}]}}


def delegating(tool: str, arguments: dict, *, after: str = "All done.") -> dict:
    """A parent that calls ``tool`` once when the prompt says 'delegate', then says ``after``."""
    return script(
        {
            "match": {"contains": "delegate"},
            "replies": [[{"text": "Delegating."}, {"tool_call": {"name": tool, "arguments": arguments}}], [{"text": after}]],
        }
    )


def ls_then(answer: str) -> dict:
    """A child that lists the workspace, then answers ``answer``."""
    return script(default={"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": answer}]]})


def make_model(name: str, rules: dict) -> ModelConfig:
    return ModelConfig.objects.create(
        name=name, provider_kind="scripted", provider_name="scripted", model_id=f"{name}-id",
        price_input=1, price_output=2, options={"rules": rules},
    )  # fmt: skip


def make_agent(name: str, rules: dict, *, workspace, provider: str = "file", **fields) -> Agent:
    return Agent.objects.create(name=name, model=make_model(f"{name}-model", rules), cwd=str(workspace), session_provider=provider, **fields)


def policy(*agents: str, **extra) -> dict:
    return {"enabled": True, "agents": list(agents), **extra}


class Parent:
    """Runs the parent's prompts in this process (the inline backend's path), children in threads."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.session_id = session_start(agent=agent).session_id
        self.sink = InMemorySink()

    @property
    def provider(self):
        return provider_for_session(self.session_id)

    def prompt(self, text: str = "please delegate", *, cancel: threading.Event | None = None):
        outcome = session_prompt(actor=None, session_id=self.session_id, text=text, dispatch=False)
        return execute_run(outcome.run.run_id, sink=self.sink, cancel=cancel)

    def start(self, text: str = "please delegate"):
        outcome = session_prompt(actor=None, session_id=self.session_id, text=text, dispatch=False)
        holder: list = []

        def work():
            from django.db import connection

            try:
                holder.append(execute_run(outcome.run.run_id, sink=self.sink))
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        thread.start()
        return thread, holder, outcome.run

    def path(self) -> list[dict]:
        """The active path without the session's opening model / thinking-level entries."""
        return [e for e in self.provider.get_active_path(self.session_id) if e["type"] not in ("model_change", "thinking_level_change")]

    def types(self) -> list[str]:
        return [e["type"] if e["type"] != "message" else e["message"]["role"] for e in self.path()]


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        raw = f.read()
    return dict(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)


OWN_PID = os.getpid()
