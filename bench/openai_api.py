"""The OpenAI-compatible endpoints against the REST prompt + socket path, and the matching of
Chat Completions histories.

    python -m bench.openai_api [--turns 15] [--first-ms 400] [--token-ms 20] [--tokens 80]
                               [--database sqlite|mysql] [--sessions 200] [--messages 40]
                               [--extra-nodes 100000] [--skip-latency] [--skip-matching]

**Latency** (a real Daphne, ``python -m neta.serve``, embedded: the inline backend and the
in-process layer; ``--database mysql`` puts it on MariaDB). The scripted model is paced like a
hosted LLM: ``--first-ms`` before its first token, then ``--tokens`` tokens of 4 characters,
one every ``--token-ms``. Each path runs ``--turns`` turns of one conversation, one after the
other, raw HTTP/websocket clients (no SDK on the clock):

* ``rest+socket``: the chat page's path: a socket subscribed to the session, ``POST
  /api/sessions/{id}/prompt/``; first delta = the first ``assistant_stream_delta`` frame, done =
  the run's ``run_state`` completed frame;
* ``responses stream``: ``POST /v1/responses`` (``stream``, ``previous_response_id``); first
  ``response.output_text.delta``, then ``response.completed``;
* ``chat stream``: ``POST /v1/chat/completions`` resending the history; first content chunk,
  then ``[DONE]``;
* ``responses whole``: the same without ``stream`` (done = the body).

Printed: time to first delta and to done (p50 / p90), the overhead per turn against the
REST + socket path (p50 of done minus its p50), and the server's CPU per turn (Daphne's
process, user + system).

**Matching** (in a process of the same deployment): ``--sessions`` sessions of the caller and
agent with ``--messages`` messages each, their conversations indexed (``ConversationNode``),
plus ``--extra-nodes`` nodes of other sessions of the same caller. A history of one session
plus a new message is matched: one indexed query (``find_in_sessions``), against scanning every
session's active path (what the index replaces), in a fresh process (no session read yet)
and again with every session's index in memory. Also: what indexing costs after a turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.deployment import Deployment as Cluster  # noqa: E402
from tests.support.deployment import cleanup_workdir  # noqa: E402
from tests.support.services import mariadb_available  # noqa: E402

TERMINAL = ("completed", "aborted", "failed", "lost")


def rules(first_ms: int, token_ms: int, tokens: int) -> dict:
    text = "".join(f"tk{i % 100:02d}" for i in range(tokens))  # 4 characters a token
    return {
        "version": 1,
        "rules": [
            {"match": "bench", "reply": {"steps": [{"pause_ms": first_ms}, {"text": text, "chunk_size": 4, "delay_ms": token_ms}]}}
        ],
        "default": {"reply": "ok"},
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --------------------------------------------------------------------------- latency


class Clock:
    def __init__(self):
        self.first: list[float] = []
        self.done: list[float] = []


async def rest_socket(cluster: Cluster, turns: int) -> Clock:
    import httpx2 as httpx
    import websockets

    clock = Clock()
    token = cluster.token
    async with httpx.AsyncClient(base_url=cluster.url(0, ""), headers={"Authorization": f"Token {token}"}, timeout=120) as http:
        session = (await http.post("/api/sessions/", json={"title": "bench"})).json()["sessionId"]
        async with websockets.connect(
            cluster.ws_url(0, session), additional_headers={"Authorization": f"Token {token}"}, origin=cluster.origin(0), max_size=None
        ) as ws:
            json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "subscribe"}))
            frames: asyncio.Queue = asyncio.Queue()

            async def read():
                async for raw in ws:
                    frames.put_nowait((time.perf_counter(), json.loads(raw)))

            reader = asyncio.create_task(read())
            for i in range(turns):
                started = time.perf_counter()
                answer = (await http.post(f"/api/sessions/{session}/prompt/", json={"text": f"bench turn {i}"})).json()
                run_id = answer["run"]["runId"]
                first = None
                while True:
                    at, frame = await frames.get()
                    if at < started:
                        continue
                    if first is None and frame.get("type") == "assistant_stream_delta" and frame.get("kind") == "text":
                        first = at - started
                    if frame.get("type") == "run_state" and frame.get("runId") == run_id and frame.get("state") in TERMINAL:
                        clock.first.append(first)
                        clock.done.append(at - started)
                        break
            reader.cancel()
    return clock


async def responses(cluster: Cluster, turns: int, *, stream: bool) -> Clock:
    import httpx2 as httpx

    clock = Clock()
    previous = None
    async with httpx.AsyncClient(base_url=cluster.url(0, "/v1"), headers={"Authorization": f"Bearer {cluster.token}"}, timeout=120) as http:
        for i in range(turns):
            body = {"model": "default", "input": f"bench turn {i}", "stream": stream, **({"previous_response_id": previous} if previous else {})}
            started = time.perf_counter()
            if not stream:
                answer = (await http.post("/responses", json=body)).json()
                clock.done.append(time.perf_counter() - started)
                clock.first.append(clock.done[-1])
                previous = answer["id"]
                continue
            first = None
            async with http.stream("POST", "/responses", json=body) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if first is None and event["type"] == "response.output_text.delta":
                        first = time.perf_counter() - started
                    if event["type"] == "response.completed":
                        clock.done.append(time.perf_counter() - started)
                        previous = event["response"]["id"]
            clock.first.append(first)
    return clock


async def chat(cluster: Cluster, turns: int) -> Clock:
    import httpx2 as httpx

    clock = Clock()
    history: list[dict] = []
    async with httpx.AsyncClient(base_url=cluster.url(0, "/v1"), headers={"Authorization": f"Bearer {cluster.token}"}, timeout=120) as http:
        for i in range(turns):
            history.append({"role": "user", "content": f"bench chat turn {i}"})
            started = time.perf_counter()
            first, text = None, []
            async with http.stream("POST", "/chat/completions", json={"model": "default", "messages": history, "stream": True}) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        clock.done.append(time.perf_counter() - started)
                        break
                    chunk = json.loads(line[6:])
                    delta = chunk["choices"][0]["delta"].get("content") if chunk.get("choices") else None
                    if delta:
                        first = first or time.perf_counter() - started
                        text.append(delta)
            clock.first.append(first)
            history.append({"role": "assistant", "content": "".join(text)})
    return clock


def daphne_cpu(cluster: Cluster) -> float:
    (pid,) = cluster.pids("daphne")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latency(cluster: Cluster, args) -> None:
    model_ms = args.first_ms + args.tokens * args.token_ms
    print(f"\nLatency: {args.turns} turns a path, model paced {args.first_ms} ms + {args.tokens} tokens x {args.token_ms} ms = {model_ms} ms a turn")
    asyncio.run(responses(cluster, 2, stream=True))  # warm up (first imports, connections)
    rows = []
    for name, scenario in (
        ("rest+socket", lambda: rest_socket(cluster, args.turns)),
        ("responses stream", lambda: responses(cluster, args.turns, stream=True)),
        ("chat stream", lambda: chat(cluster, args.turns)),
        ("responses whole", lambda: responses(cluster, args.turns, stream=False)),
    ):
        cpu = daphne_cpu(cluster)
        clock = asyncio.run(scenario())
        cpu = (daphne_cpu(cluster) - cpu) / args.turns
        rows.append((name, clock, cpu))
    base_done = statistics.median(rows[0][1].done)
    base_first = statistics.median(rows[0][1].first)
    print(f"{'path':<18} {'first delta p50/p90 (ms)':>26} {'done p50/p90 (ms)':>20} {'vs rest+socket (ms)':>22} {'CPU/turn (ms)':>14}")
    for name, clock, cpu in rows:
        first = f"{pct(clock.first, .5) * 1000:.0f} / {pct(clock.first, .9) * 1000:.0f}"
        done = f"{pct(clock.done, .5) * 1000:.0f} / {pct(clock.done, .9) * 1000:.0f}"
        delta = f"{(statistics.median(clock.first) - base_first) * 1000:+.0f} / {(statistics.median(clock.done) - base_done) * 1000:+.0f}"
        print(f"{name:<18} {first:>26} {done:>20} {delta:>22} {cpu * 1000:>14.1f}")
    print("(vs rest+socket: first delta / done, p50 against p50; 'responses whole' has no first delta: its body is the done)")


# --------------------------------------------------------------------------- matching

POPULATE = r"""
import json, os, sys, time, django
django.setup()
from django.contrib.auth import get_user_model
from runtime.models import Agent, ConversationNode
from runtime.openai_api.conversation import index_conversation
from runtime.openai_api.start import stored_message
from runtime.openai_api.inputs import Message
from runtime.sessions.services import session_start
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider

S, M, EXTRA = int(os.environ["B_SESSIONS"]), int(os.environ["B_MESSAGES"]), int(os.environ["B_EXTRA"])
user = get_user_model().objects.get(username="alice")
agent = Agent.objects.get(name="default")
started = time.perf_counter()
index_ms = []
for s in range(S):
    meta = session_start(agent=agent, user=user)
    provider = get_provider(meta.provider)
    for i in range(M // 2):
        provider.append_message(meta.session_id, stored_message(Message("user", f"session {s} question {i}: how does part {i} work?")))
        provider.append_message(meta.session_id, stored_message(Message("assistant", f"Part {i} of session {s} works like this. " * 8)))
    leaf = provider.get_session(meta.session_id).leaf_entry_id
    t = time.perf_counter()
    index_conversation(meta.session_id, leaf)
    index_ms.append((time.perf_counter() - t) * 1000)
built = time.perf_counter() - started
# The same caller's other sessions, as rows only: EXTRA nodes in sessions of 50.
t = time.perf_counter()
rows = []
for k in range(EXTRA // 50):
    rows.append(AgentSession(session_id=f"bench-extra-{k}", header="{}", agent="default", user=user))
AgentSession.objects.bulk_create(rows, batch_size=1000)
pks = dict(AgentSession.objects.filter(session_id__startswith="bench-extra-").values_list("session_id", "pk"))
import hashlib
nodes = [
    ConversationNode(session_id=pk, owner_id=user.pk, entry_id=f"{d:08x}", depth=d + 1, digest=hashlib.sha256(f"{sid}{d}".encode()).hexdigest()[:32])
    for sid, pk in pks.items() for d in range(50)
]
ConversationNode.objects.bulk_create(nodes, batch_size=2000)
# One more turn's indexing on a session that has M messages already indexed.
meta = AgentSession.objects.filter(user=user, agent="default").exclude(session_id__startswith="bench-extra-").order_by("-pk").first()
provider = get_provider(meta.provider)
provider.append_message(meta.session_id, stored_message(Message("user", "one more")))
provider.append_message(meta.session_id, stored_message(Message("assistant", "one more answer")))
t = time.perf_counter()
new = index_conversation(meta.session_id, provider.get_session(meta.session_id).leaf_entry_id)
turn_ms = (time.perf_counter() - t) * 1000
print(json.dumps({"built_s": built, "index_session_ms": sorted(index_ms)[len(index_ms) // 2], "turn_index_ms": turn_ms,
                  "turn_new_nodes": new, "nodes": ConversationNode.objects.filter(owner_id=user.pk).count()}))
"""

MEASURE = r"""
import json, os, statistics, time, django
django.setup()
from django.contrib.auth import get_user_model
from runtime.openai_api.conversation import find_in_sessions, path_nodes, request_digests
from runtime.openai_api.inputs import Message
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session

user = get_user_model().objects.get(username="alice")
sessions = list(AgentSession.objects.filter(user=user, agent="default").exclude(session_id__startswith="bench-extra-").order_by("pk").values_list("session_id", flat=True))
target = sessions[len(sessions) // 2]
provider = provider_for_session(target)
path = provider.get_active_path(target)
messages = []
for e in path:
    m = e.get("message") if e.get("type") == "message" else None
    if m and m.get("role") in ("user", "assistant"):
        text = m["content"] if isinstance(m["content"], str) else "".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")
        messages.append(Message(m["role"], text))
messages.append(Message("user", "and a new question"))

def lookup():
    return find_in_sessions(owner_id=user.pk, agent="default", digests=request_digests(messages))

def scan():
    # What the index replaces: every session of the caller and agent, its active path walked.
    digests = request_digests(messages)
    wanted = {d: i + 1 for i, d in enumerate(digests)}
    best = (0, None)
    for sid in AgentSession.objects.filter(user=user, agent="default").exclude(session_id__startswith="bench-extra-").values_list("session_id", flat=True):
        for node in path_nodes(provider_for_session(sid).get_active_path(sid)):
            depth = wanted.get(node.digest)
            if depth and depth > best[0]:
                best = (depth, (sid, node.entry_id))
    return best

t = time.perf_counter(); match = lookup(); first_lookup = (time.perf_counter() - t) * 1000
assert match is not None and match.session_id == target and match.depth == len(messages) - 1, match
times = []
for _ in range(50):
    t = time.perf_counter(); lookup(); times.append((time.perf_counter() - t) * 1000)
t = time.perf_counter(); found = scan(); cold_scan = (time.perf_counter() - t) * 1000
assert found[1][0] == target and found[0] == len(messages) - 1
warm = []
for _ in range(3):
    t = time.perf_counter(); scan(); warm.append((time.perf_counter() - t) * 1000)
print(json.dumps({"lookup_first_ms": first_lookup, "lookup_p50_ms": statistics.median(times), "lookup_p90_ms": sorted(times)[int(0.9 * len(times))],
                  "scan_cold_ms": cold_scan, "scan_warm_ms": statistics.median(warm), "sessions": len(sessions), "depth": match.depth}))
"""


def matching(cluster: Cluster, args) -> None:
    env = {"B_SESSIONS": str(args.sessions), "B_MESSAGES": str(args.messages), "B_EXTRA": str(args.extra_nodes)}
    built = json.loads(cluster.run([sys.executable, "-c", POPULATE], env=env).strip().splitlines()[-1])
    measured = json.loads(cluster.run([sys.executable, "-c", MEASURE]).strip().splitlines()[-1])
    print(
        f"\nMatching: {measured['sessions']} sessions x {args.messages} messages of the caller and agent"
        f" + {args.extra_nodes} more nodes ({built['nodes']} rows), a history of {measured['depth']} messages + 1"
    )
    print(f"  indexed lookup (find_in_sessions): first {measured['lookup_first_ms']:.2f} ms, then p50 {measured['lookup_p50_ms']:.2f} / p90 {measured['lookup_p90_ms']:.2f} ms")
    print(f"  scanning every session's active path: {measured['scan_cold_ms']:.0f} ms in a fresh process, {measured['scan_warm_ms']:.0f} ms with every index in memory")
    print(f"  indexing: a {args.messages}-message session {built['index_session_ms']:.1f} ms (p50); after one more turn {built['turn_index_ms']:.1f} ms ({built['turn_new_nodes']} new nodes)")
    print(f"  (populating took {built['built_s']:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--first-ms", type=int, default=400)
    parser.add_argument("--token-ms", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=80)
    parser.add_argument("--database", choices=("sqlite", "mysql"), default="sqlite")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--extra-nodes", type=int, default=100_000)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-matching", action="store_true")
    args = parser.parse_args()
    if args.database == "mysql" and not mariadb_available():
        sys.exit("MariaDB is not reachable (NETA_TEST_MYSQL_URL)")
    workdir = Path(tempfile.mkdtemp(prefix="neta-bench-openai-"))
    try:
        with Cluster(
            workdir, servers=1, workers=0, database=args.database, redis=False, backend="inline",
            rules=rules(args.first_ms, args.token_ms, args.tokens),
        ) as cluster:  # fmt: skip
            print(f"Daphne (neta.serve), inline backend, in-process layer, {args.database}")
            if not args.skip_latency:
                latency(cluster, args)
            if not args.skip_matching:
                matching(cluster, args)
    finally:
        cleanup_workdir(workdir)


if __name__ == "__main__":
    main()
