"""deploy/Procfile as an operator runs it, and a deployment of two hosts.

A deployment of its own on MariaDB and Redis, started with exactly the Procfile's commands
(``web``, ``runs``, ``subagents``; the settings from the environment, as honcho or the
systemd units give them). Two runs workers play two hosts on this machine: each its own
``NETA_HOST_NAME``, worker name and var, workspace and sessions folders. A session's first
turn writes a file on host A; while A's one thread is busy, host B comes up idle, and the
session's second turn waits in A's queue (session affinity), not the common one B takes
from, then runs on A and reads the file back; B's disk never had it. The sessions are in the mysql store (what the distributed
bootstrap makes the default), so the web process on A reads them wherever they ran.
"""

from __future__ import annotations

import json
import re

import pytest
import redis

from tests.support.deployment import VENV_BIN, Deployment
from tests.support.rules import rules
from tests.support.services import REDIS_URL, REPO, free_port, require_mariadb_and_redis, wait_until

pytestmark = pytest.mark.slow

def notes_rules(release: str) -> dict:
    return rules(
        {"match": {"contains": "write the note"},
         "replies": [[{"tool_call": {"name": "write", "arguments": {"path": "note.txt", "content": "from the first turn\n"}}}], [{"text": "Written."}]]},
        {"match": {"contains": "read the note"},
         "replies": [[{"tool_call": {"name": "read", "arguments": {"path": "note.txt"}}}], [{"text": "Read."}]]},
        {"match": {"contains": "hold"}, "reply": {"steps": [{"pause_ms": 60_000, "until_file": release}, {"text": "held"}]}},
    )  # fmt: skip


def procfile() -> dict[str, str]:
    commands = {}
    for line in (REPO / "deploy" / "Procfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, command = line.split(":", 1)
            commands[name.strip()] = command.strip()
    return commands


def _host(dep: Deployment, name: str) -> dict:
    root = dep.workdir / name
    return {"NETA_HOST_NAME": name, "NETA_WORKER_NAME": f"{dep.name}-runs-{name}", "NETA_VAR_DIR": str(root / "var"),
            "NETA_WORKSPACE_DIR": str(root / "workspace"), "NETA_SESSIONS_DIR": str(root / "sessions")}  # fmt: skip


def _shell(command: str) -> list[str]:
    return ["/bin/sh", "-c", "exec " + command]


def _runs(dep: Deployment, session_id: str) -> list[tuple]:
    return dep.sql("SELECT host, status, error FROM runtime_agentrun WHERE session_id = %s ORDER BY id", session_id)


def _prompt(dep: Deployment, session_id: str, text: str) -> None:
    status, body = dep.http("web", "post", f"/api/sessions/{session_id}/prompt/", {"text": text})
    assert status == 202, body


def test_the_procfile_serves_a_conversation_whose_second_turn_finds_its_files_on_its_host(tmp_path):
    require_mariadb_and_redis()
    commands = procfile()
    assert set(commands) == {"web", "runs", "subagents"}
    assert re.search(r"-P threads -c \S+", commands["runs"]) and "-P prefork" in commands["subagents"]
    with Deployment(tmp_path / "dep", servers=0, database="mysql", redis=True, backend="celery",
                    extra_env={"PATH": f"{VENV_BIN}:/usr/bin:/bin"}) as dep:  # fmt: skip
        (dep.workdir / "host-a").mkdir(parents=True)
        (dep.workdir / "host-b").mkdir(parents=True)
        release = dep.workdir / "release"
        agent = dep.add_agent("notes", notes_rules(str(release)), session_provider="mysql")
        port = free_port()
        dep.spawn("web", _shell(commands["web"]), {"PORT": str(port), **_host(dep, "host-a")})
        dep.server_names.append("web")
        dep.ports.append(port)
        dep.spawn("subagents", _shell(commands["subagents"]), {"NETA_SUBAGENT_PROCESSES": "1", **_host(dep, "host-a")})
        dep.spawn("runs-a", _shell(commands["runs"]), {"NETA_RUNS_THREADS": "1", **_host(dep, "host-a")})
        for name in ("runs-a", "subagents"):
            dep.wait_log(name, "ready.")
        dep.wait_server("web")
        assert f".> {dep.subagent_queue} " in dep.log("subagents")
        assert f".> {dep.queue}.host.host-a " in dep.log("runs-a")  # its host's queue beside the deployment's

        status, body = dep.http("web", "post", "/api/sessions/", {"agent": agent})
        assert status == 201, body
        notes = body["sessionId"]
        _prompt(dep, notes, "write the note")
        wait_until(lambda: [r[1] for r in _runs(dep, notes)] == ["completed"], 60, "the first turn")
        assert _runs(dep, notes)[0][0] == "host-a"

        # Host A's one thread is busy; host B comes up idle: a turn of the common queue would go to B.
        status, body = dep.http("web", "post", "/api/sessions/", {"agent": agent})
        busy = body["sessionId"]
        _prompt(dep, busy, "hold on")
        wait_until(lambda: [r[1] for r in _runs(dep, busy)] == ["running"], 60, "host A to be busy")
        dep.spawn("runs-b", _shell(commands["runs"]), _host(dep, "host-b"))
        dep.wait_log("runs-b", "ready.")
        _prompt(dep, notes, "read the note")
        # Sent to host A's queue, not the common one that idle B takes from: it waits there.
        broker = redis.Redis.from_url(REDIS_URL)
        try:
            wait_until(lambda: broker.llen(f"{dep.queue}.host.host-a") == 1, 30, "the turn in host A's queue")
        finally:
            broker.close()
        assert [r[1] for r in _runs(dep, notes)] == ["completed", "queued"]
        release.touch()  # host A's thread is free again
        wait_until(lambda: [r[1] for r in _runs(dep, notes)] == ["completed", "completed"], 60, "the second turn")
        assert [r[0] for r in _runs(dep, notes)] == ["host-a", "host-a"], _runs(dep, notes)
        messages = [line["message"] for line in dep.export(notes) if line["type"] == "message"]
        [read] = [m for m in messages if m["role"] == "toolResult" and m.get("toolName") == "read"]
        assert not read.get("isError") and "from the first turn" in json.dumps(read["content"]), read
        assert list((dep.workdir / "host-a" / "workspace").rglob("note.txt"))
        assert not list((dep.workdir / "host-b").rglob("note.txt"))
        assert "Traceback" not in dep.log("runs-a") + dep.log("runs-b") + dep.log("web")
