"""A run an OpenAI client starts is an ordinary run: the chat page's socket sees it live, the
runs list has it with its usage and cost, its session exports as a Pi file that Pi reads."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading

import pytest

from sessions_tree.pi_view import session_view
from tests.openai_api.openai_support import conversation, role

pytestmark = [pytest.mark.slow]

SESSION = "x-neta-session-id"


def test_a_socket_sees_the_run_live_and_the_runs_list_has_it(deployment):
    import websockets

    client = deployment.client()
    stream = client.responses.create(model="default", input="wait for go", stream=True)
    sid = stream.response.headers[SESSION]
    seen: list[dict] = []
    events = []
    reader = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    reader.start()
    cluster = deployment.cluster

    async def watch():
        async with websockets.connect(
            cluster.ws_url(0, sid), additional_headers={"Authorization": f"Token {deployment.tokens['alice']}"}, origin=cluster.origin(0)
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "subscribe"}))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
                seen.append(frame)
                if frame["type"] == "subscribed":
                    deployment.go.touch()  # the model goes on: the socket sees the rest live
                if frame["type"] == "run_state" and frame["state"] in ("completed", "failed", "aborted", "lost"):
                    return

    asyncio.run(watch())
    reader.join(60)
    snapshot = next(f for f in seen if f["type"] == "snapshot")["snapshot"]
    assert snapshot["inFlight"] is not None  # the run was streaming when the page opened
    live = "".join(f["delta"] for f in seen if f["type"] == "assistant_stream_delta")
    assert live.endswith(" released.")
    assert [f["state"] for f in seen if f["type"] == "run_state"][-1] == "completed"
    final = events[-1].response
    assert final.output_text == "Holding released."
    (run,) = deployment.runs(sid)
    assert run["status"] == "completed" and run["prompt"] == "wait for go"
    assert run["outputTokens"] == final.usage.output_tokens and run["cost"] > 0
    assert run["inputTokens"] + run["cacheReadTokens"] + run["cacheWriteTokens"] == final.usage.input_tokens


@pytest.mark.oracle
def test_pi_reads_a_session_an_openai_client_branched(deployment, oracle, tmp_path):
    client = deployment.client()
    first = client.responses.create(model="default", input="pi one")
    second = client.responses.create(model="default", input="use a tool for pi", previous_response_id=first.id)
    raw = client.responses.with_raw_response.create(
        model="default", previous_response_id=first.id,
        input=[{"role": "user", "content": "pi aside"}, {"role": "assistant", "content": "brought along"}, {"role": "user", "content": "pi two"}],
    )  # fmt: skip
    sid = raw.headers[SESSION]
    assert second.status == raw.parse().status == "completed"
    status, exported = deployment.rest("get", f"/api/sessions/{sid}/export/")
    assert status == 200
    text = exported if isinstance(exported, str) else "\n".join(json.dumps(line) for line in exported)
    path = tmp_path / "openai.jsonl"
    path.write_text(text if text.endswith("\n") else text + "\n")
    result = subprocess.run([str(oracle), "context", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pi = json.loads(result.stdout)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header, entries = lines[0], lines[1:]
    assert session_view(header, entries, entries[-1]["id"], file_version=3) == pi
    pi_talk = [(m["role"], m["content"] if isinstance(m["content"], str) else "".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")) for m in pi["messages"] if m["role"] in ("user", "assistant")]
    assert pi_talk == conversation(entries, entries[-1]["id"]) == [
        ("user", "pi one"), ("assistant", "Echo: pi one"),
        ("user", "pi aside"), ("assistant", "brought along"), ("user", "pi two"), ("assistant", "Echo: pi two"),
    ]  # fmt: skip
    assert any(role(e) == "toolResult" for e in entries)  # the other branch, with its tool call, is in the file too


def test_answers_being_followed_hold_no_request_thread(deployment):
    """The deployment has two request threads (NETA_HTTP_THREADS=2): four answers held open at
    once, streamed and not, leave them free for the REST API and for a fifth answer."""
    import httpx2 as httpx

    headers = {"Authorization": f"Bearer {deployment.tokens['alice']}", "Content-Type": "application/json"}
    url = deployment.cluster.url(0, "/v1/responses")
    streams, waiting = [], []
    for i, stream in enumerate((True, True, False, False)):
        body = json.dumps({"model": "default", "input": f"hold on number {i}", "stream": stream})
        if stream:
            client = httpx.Client(timeout=httpx.Timeout(60))
            request = client.build_request("POST", url, content=body, headers=headers)
            streams.append((client, client.send(request, stream=True)))
        else:  # a whole answer: the request waits on its connection, which the test closes at the end
            waiting.append(_post_on_a_socket(deployment.cluster.port(0), "/v1/responses", body, headers))
    for client, response in streams:
        assert response.status_code == 200 and next(response.iter_lines()).startswith("event: response.created")
    status, me = deployment.rest("get", "/api/me/")
    assert status == 200 and me["username"] == "alice"
    answer = deployment.client().responses.create(model="default", input="and one more")
    assert answer.output_text == "Echo: and one more"
    for client, response in streams:  # the clients go away: their runs are aborted
        response.close()
        client.close()
    for sock in waiting:
        sock.close()


def _post_on_a_socket(port: int, path: str, body: str, headers: dict) -> socket.socket:
    """Send a POST and leave its answer unread (the caller closes the connection)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body.encode())}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n" + body).encode())
    return sock
