"""What the OpenAI-compatible endpoints' tests share: the scripted model's rules, the deployment
as an OpenAI client addresses it, and reading the tree back (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import time

from tests.support.deployment import Deployment as Cluster

# The scripted model's rules (docs/llm.md): what each test's prompt makes the agent do.
RULES = {
    "version": 1,
    "chunk_size": 4,
    "delay_ms": 2,
    "rules": [
        # Instructions reach the system prompt: the model answers by what it was told.
        {"match": {"regex": "(?i)who are you", "system": "PIRATE"}, "reply": "Arr, a pirate agent."},
        {"match": "use a tool", "replies": [[{"text": "Let me look."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], "Done looking."]},
        # Held mid-answer until the test lets go (or the run is aborted).
        {"match": "hold on", "reply": {"steps": [{"text": "Holding"}, {"pause_ms": 60000}, {"text": " released."}]}},
        {"match": "wait for go", "reply": {"steps": [{"text": "Holding"}, {"pause_ms": 60000, "until_file": "@GO@"}, {"text": " released."}]}},
        {"match": "question for me", "replies": [
            [{"text": "I need a decision."}, {"tool_call": {"name": "ask_user", "arguments": {"question": "Which one?", "options": ["A", "B"]}}}],
            "You chose {{result}}.",
        ]},
        {"match": "break down", "reply": {"steps": [{"text": "Partial"}], "error": "upstream overloaded (scripted)"}},
        {"match": "two blocks", "reply": {"steps": [{"text": "First block."}, {"thinking": "hmm"}, {"text": "Second block."}]}},
    ],
    "default": {"reply": "Echo: {{user}}"},
}

SETUP = r"""
import json, os, django
django.setup()
from django.contrib.auth import get_user_model
from runtime.api.tokens import api_token_create
from runtime.models import Agent
User = get_user_model()
alice = User.objects.get(username="alice")
bob = User.objects.create_user("bob")
default = Agent.objects.get(name="default")
secret = Agent.objects.create(name="secret", model=default.model, access_restricted=True)
visual = default.model
visual.supports_images = True
visual.save()
print(json.dumps({
    "bob": api_token_create(user=bob).secret,
    "alice_read_only": api_token_create(user=alice, read_only=True).secret,
}))
"""


class Deployment:
    def __init__(self, cluster: Cluster, tokens: dict):
        self.cluster = cluster
        self.tokens = {"alice": cluster.token, **tokens}
        self.base_url = cluster.url(0, "/v1")
        self._http = None

    def client(self, who: str = "alice", **kwargs):
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=self.tokens[who], max_retries=0, **kwargs)

    def async_client(self, who: str = "alice", **kwargs):
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self.tokens[who], max_retries=0, **kwargs)

    def rest(self, method: str, path: str, body: dict | None = None, who: str = "alice"):
        return self.cluster.http(0, method, path, body, token=self.tokens[who])

    def raw(self, method: str, path: str, body=None, *, token: str | None = "alice", headers: dict | None = None):
        """(status, headers, parsed body) of a plain HTTP request to the server."""
        import httpx2 as httpx

        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {self.tokens.get(token, token)}"
        content = body if isinstance(body, (bytes, str)) else (json.dumps(body) if body is not None else None)
        if content is not None:
            sent.setdefault("Content-Type", "application/json")
        if self._http is None:  # one client, kept alive: a client's set-up is ~45 ms of CPU (its TLS context)
            self._http = httpx.Client(timeout=60)
        response = self._http.request(method, self.cluster.url(0, path), content=content, headers=sent)
        try:
            parsed = response.json()
        except ValueError:
            parsed = response.text
        return response.status_code, response.headers, parsed

    def entries(self, session_id: str) -> list[dict]:
        status, body = self.rest("get", f"/api/sessions/{session_id}/entries/?limit=500")
        assert status == 200, body
        return body["results"]

    def session(self, session_id: str) -> dict:
        status, body = self.rest("get", f"/api/sessions/{session_id}/")
        assert status == 200, body
        return body

    def runs(self, session_id: str) -> list[dict]:
        status, body = self.rest("get", f"/api/runs/?session={session_id}&limit=200")
        assert status == 200, body
        return body["results"]

    def session_count(self) -> int:
        status, body = self.rest("get", "/api/sessions/?limit=200")
        assert status == 200, body
        return len(body["results"])

    def log(self) -> str:
        return self.cluster.log("daphne0")


# --------------------------------------------------------------------------- reading the tree


def by_id(entries: list[dict]) -> dict[str, dict]:
    return {e["id"]: e for e in entries}


def children(entries: list[dict], parent_id: str) -> list[dict]:
    return [e for e in entries if e.get("parentId") == parent_id]


def role(entry: dict) -> str | None:
    message = entry.get("message") if entry.get("type") == "message" else None
    return message.get("role") if isinstance(message, dict) else None


def text_of(entry: dict) -> str:
    content = entry["message"].get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def path_to(entries: list[dict], entry_id: str) -> list[dict]:
    index = by_id(entries)
    path = []
    while entry_id is not None:
        entry = index[entry_id]
        path.append(entry)
        entry_id = entry.get("parentId")
    return path[::-1]


def conversation(entries: list[dict], leaf_id: str) -> list[tuple[str, str]]:
    """(role, text) of the user and assistant messages root→leaf."""
    return [(role(e), text_of(e)) for e in path_to(entries, leaf_id) if role(e) in ("user", "assistant")]


def wait_for_run(deployment, session_id: str, *states: str, timeout: float = 60) -> dict:
    """The session's latest run once its status is one of ``states``."""
    deadline = time.monotonic() + timeout
    while True:
        runs = deployment.runs(session_id)
        if runs and runs[0]["status"] in states:
            return runs[0]
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)
