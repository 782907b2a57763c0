"""The product under load: N sessions x M turns of the scripted demo model, as users drive it.

    python -m bench product_load
    python -m bench.product_load [--mode embedded|distributed|both] [--sessions 1,10,50] [--turns 5]
                                 [--models scripted,wire] [--wire-sessions 300] [--wire-turns 1] [--wire-seconds 20]
                                 [--wire-ramp 0] [--turn-timeout 60] [--worker-processes 2] [--worker-concurrency 64]
                                 [--memory 5000,1000] [--json FILE] [--keep]

Starts the real parts (``bench/load_stack.py``): *embedded* is one Daphne with
SQLite, file sessions, the in-memory channel layer and the inline backend;
*distributed* is two Daphnes and ``--worker-processes`` Celery runs workers on a threads
pool (``-P threads -c --worker-concurrency``, as deploy/Procfile starts them) on MariaDB
and Redis. Both stacks are up together and every phase runs mode after mode (alternated,
under the same load of a shared machine; the load average is printed before each). It creates
users and tokens with ``manage.py``, then for each session count N: N new
sessions (REST), one websocket per session (``subscribe``: snapshot, then
patches), and every session runs M turns one after the other: ``POST
/prompt/`` and wait for the run's terminal ``run_state`` on the socket (at
most ``--turn-timeout`` seconds). Distributed, a session's socket is on one
Daphne and its prompts go to the other. The agent is the bootstrapped default
(scripted demo model: a thinking block, an ``ls`` tool call, a markdown answer:
two model calls per turn, ~2 s of model time). ``--models wire``: sessions of an agent
on ``bench/fake_provider.py`` (Anthropic's wire protocol in a process of its own, a reply
streamed for ``--wire-seconds`` at ``--wire-rate`` deltas a second). The wire sessions
send their first prompts all at once (a burst), or spread evenly over ``--wire-ramp``
seconds (sessions arriving one after another; with turns as long as the ramp and more
than one turn each, every session is in a turn from the ramp's end on: a steady load).

Printed side by side for every mode and N (the measured window runs from the
first prompt to the last client's end):

* turns/s as the server did them (completed runs / first ``createdAt`` to last
  ``finishedAt``, from ``GET /api/runs/``) and as clients saw them (terminal
  ``run_state`` frames received / the window);
* ack (prompt's HTTP 202), first ``assistant_stream_delta`` and done (terminal
  ``run_state``) after the prompt was sent, p50/p95 (done also over every session's
  turns after its first: with a ramp, the turns of the steady load); of the ack, how
  long the prompt waited for one of the bench's HTTP threads and how long from its
  request leaving the bench to its run row's ``createdAt`` (the server's work before
  the commit);
* CPU per completed turn per process (``/proc/<pid>/stat`` of each process group
  before/after; Celery's pool children count with their worker); MariaDB's and
  Redis' server CPU too, marked * because other work on the machine shares them;
* statements per turn, counted at each process's database driver by the bench's
  ``sitecustomize`` (see ``load_stack.py``; exact for both SQLite and MariaDB,
  ``BEGIN``/``COMMIT`` included); distributed also MariaDB's global ``Questions``
  delta (shared server: the background rate measured just before is subtracted);
* in-flight sessions: the most runs running at one moment (their start and end);
  DB connections held: the most MariaDB had open to the stack's database (sampled
  twice a second);
* errors: HTTP errors, failed/lost runs, runs still queued/running at the end
  (stuck), turns that timed out, socket closes by code; lost events: tree
  revisions the socket never delivered, ``session_entry_added`` seen vs entries
  written (``entryCount``), terminal ``run_state`` missing while the run row says
  it finished; and the server logs' tell-tales (1213 deadlocks, ChannelFull,
  TimeoutError, tracebacks) with a first example.

``--memory S,T``: after the load table, each mode creates S sessions and runs T
turns (over 50 sessions) and prints every process's RSS before, after the
sessions and after the turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.load_stack import Stack, services_available  # noqa: E402
from bench.report import machine, percentile  # noqa: E402

TREE_TYPES = {"session_entry_added", "session_entry_updated", "session_leaf_changed",
              "session_branch_summary_added", "session_compaction_added"}  # fmt: skip
TERMINAL = ("completed", "aborted", "failed", "lost")
SESSIONS_PER_USER = 10
LOG_PATTERNS = {
    "deadlock 1213": re.compile(r"\b1213\b|Deadlock found"),
    "lock wait 1205": re.compile(r"\b1205\b|Lock wait timeout"),
    "ChannelFull": re.compile(r"ChannelFull"),
    "over capacity": re.compile(r"over capacity"),
    "TimeoutError": re.compile(r"TimeoutError"),
    "database locked": re.compile(r"database is locked"),
    "Traceback": re.compile(r"^Traceback", re.M),
    "ERROR lines": re.compile(r"\bERROR\b"),
}


# --------------------------------------------------------------------------- HTTP (urllib on a thread pool)


class Http:
    def __init__(self, stack: Stack, threads: int = 64):
        self.stack = stack
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="http")

    def call(self, server: int, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict | str]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.stack.ports[server]}{path}", data=data, method=method)
        request.add_header("Authorization", f"Token {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw, status = response.read(), response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        except (urllib.error.URLError, OSError) as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    async def __call__(self, server: int, method: str, path: str, token: str, body: dict | None = None):
        """``(status, body)`` of the request, made on one of this pool's threads."""
        return (await self.timed(server, method, path, token, body))[2:]

    async def timed(self, server: int, method: str, path: str, token: str, body: dict | None = None):
        """``(sent_mono, sent_wall, status, body)``: when the request left one of this pool's
        threads (a burst of prompts waits for a free one first), on both clocks."""

        def call():
            sent = time.monotonic(), time.time()
            return (*sent, *self.call(server, method, path, token, body))

        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    def all_pages(self, server: int, path: str, token: str) -> list[dict]:
        items, url = [], path
        while url:
            status, body = self.call(server, "GET", url, token)
            if status != 200:
                raise RuntimeError(f"GET {url}: {status} {body}")
            items.extend(body["results"])
            url = body.get("next") or ""
            if url.startswith("http"):
                url = url.split(str(self.stack.ports[server]), 1)[1]
        return items


# --------------------------------------------------------------------------- one session's client


@dataclass
class Turn:
    sent: float
    run_id: str = ""
    status: int = 0
    ack: float | None = None
    queued: float | None = None  # of the ack: waiting for one of the bench's HTTP threads
    to_run: float | None = None  # of the ack: from the request leaving the bench to the run row's createdAt
    first_delta: float | None = None
    done: float | None = None
    state: str = ""
    outcome: str = ""  # ok | failed state | http error | run_state missing | still queued | timeout


@dataclass
class Client:
    index: int
    session_id: str
    token: str
    ws_server: int
    http_server: int
    turns: list[Turn] = field(default_factory=list)
    revisions: list[int] = field(default_factory=list)
    entries_added: int = 0
    closes: Counter = field(default_factory=Counter)
    reconnects: int = 0
    start_revision: int = 0
    start_entries: int = 0
    waiting: dict = field(default_factory=dict)  # run id -> asyncio.Event
    terminal: dict = field(default_factory=dict)  # run id -> (state, time)
    first_delta: dict = field(default_factory=dict)  # run id -> time
    current: str = ""
    error: str = ""


class SessionSocket:
    """One websocket on a session: snapshot + patches, reconnect with ``sinceRevision`` after a close."""

    def __init__(self, stack: Stack, client: Client):
        self.stack, self.client = stack, client
        self.ws = None
        self.task: asyncio.Task | None = None
        self.closing = False

    async def open(self) -> None:
        await self._connect(since=None)
        self.task = asyncio.create_task(self._read())

    async def _connect(self, since: int | None) -> None:
        import websockets

        port = self.stack.ports[self.client.ws_server]
        self.ws = await websockets.connect(
            f"ws://127.0.0.1:{port}/ws/sessions/{self.client.session_id}/",
            additional_headers={"Authorization": f"Token {self.client.token}"},
            origin=f"http://127.0.0.1:{port}", max_size=None, open_timeout=60, ping_interval=None,
        )  # fmt: skip
        hello = json.loads(await self.ws.recv())
        if hello.get("type") != "hello":
            raise RuntimeError(f"expected hello, got {hello}")
        await self.ws.send(json.dumps({"type": "subscribe", "sinceRevision": since}))
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            kind = frame.get("type")
            if kind == "snapshot":
                snapshot = frame["snapshot"]
                self.client.start_revision = snapshot["revision"]
            elif kind in TREE_TYPES:
                self._on_frame(frame, time.monotonic())
            elif kind == "subscribed":
                return
            elif kind == "error":
                raise RuntimeError(f"subscribe refused: {frame}")

    def _on_frame(self, frame: dict, now: float) -> None:
        client, kind = self.client, frame.get("type")
        if kind in TREE_TYPES:
            client.revisions.append(frame["revision"])
            if kind == "session_entry_added":
                client.entries_added += 1
        elif kind == "assistant_stream_delta":
            run = frame.get("runId") or client.current
            client.first_delta.setdefault(run, now)
        elif kind == "run_state" and frame.get("state") in TERMINAL:
            run = frame.get("runId") or client.current
            client.terminal.setdefault(run, (frame["state"], now))
            if run in client.waiting:
                client.waiting[run].set()

    async def _read(self) -> None:
        import websockets

        while True:
            try:
                raw = await self.ws.recv()
            except websockets.ConnectionClosed as exc:
                if self.closing:
                    return
                code = exc.rcvd.code if exc.rcvd else 1006
                self.client.closes[code] += 1
                since = self.client.revisions[-1] if self.client.revisions else self.client.start_revision
                for attempt in range(5):
                    try:
                        await asyncio.sleep(0.5 * (attempt + 1))
                        await self._connect(since=since)
                        self.client.reconnects += 1
                        break
                    except Exception as error:  # noqa: BLE001 - counted, then tried again
                        self.client.closes[f"reconnect failed: {type(error).__name__}"] += 1
                else:
                    self.client.error = "socket lost for good"
                    for event in self.client.waiting.values():
                        event.set()
                    return
                continue
            self._on_frame(json.loads(raw), time.monotonic())

    async def close(self) -> None:
        self.closing = True
        if self.ws is not None:
            await self.ws.close()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, 10)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                self.task.cancel()


async def drive(http: Http, client: Client, turns: int, timeout: float, go: asyncio.Event, delay: float = 0.0) -> None:
    await go.wait()
    if delay:
        await asyncio.sleep(delay)  # a ramp: this session's first prompt comes later
    for _ in range(turns):
        turn = Turn(sent=time.monotonic())
        client.turns.append(turn)
        sent, sent_wall, status, body = await http.timed(client.http_server, "POST", f"/api/sessions/{client.session_id}/prompt/", client.token,
                                                         {"text": f"turn {len(client.turns)} of session {client.index}"})  # fmt: skip
        turn.status, turn.ack, turn.queued = status, time.monotonic() - turn.sent, sent - turn.sent
        created = _wall_time((body.get("run") or {}).get("createdAt") if isinstance(body, dict) else None)
        if created is not None:  # the stack runs on this machine: one clock
            turn.to_run = created - sent_wall
        if status != 202:
            turn.outcome = f"http {status}"
            client.error = str(body)[:300]
            continue
        run_id = turn.run_id = str(body["run"]["runId"])
        client.current = run_id
        event = client.waiting.setdefault(run_id, asyncio.Event())
        if run_id not in client.terminal:
            try:
                await asyncio.wait_for(event.wait(), max(0.1, turn.sent + timeout - time.monotonic()))
            except asyncio.TimeoutError:
                pass
        if run_id in client.first_delta:
            turn.first_delta = client.first_delta[run_id] - turn.sent
        if run_id in client.terminal:
            turn.state, at = client.terminal[run_id]
            turn.done = at - turn.sent
            turn.outcome = "ok" if turn.state == "completed" else f"run {turn.state}"
            continue
        status, run = await http(client.http_server, "GET", f"/api/runs/{run_id}/", client.token)
        turn.state = run.get("status", "") if status == 200 and isinstance(run, dict) else f"http {status}"
        if turn.state in TERMINAL:
            turn.outcome = "run_state missing"
        else:
            turn.outcome = "timeout" if turn.state == "running" else "still queued"
            return  # the next prompt would only queue behind this run: this session stops here


# --------------------------------------------------------------------------- one measured phase


async def _drain(http: Http, stack: Stack, clients: list[Client], limit: float = 300, still: float = 30) -> float:
    """After the clients: wait (sockets still open) until no run is active, or the active ones stop moving
    for ``still`` seconds (then they are wedged, not slow). Returns the seconds waited."""
    started = last_change = time.monotonic()
    previous = None
    tokens = sorted({c.token for c in clients})
    while time.monotonic() - started < limit:
        active = []
        for token in tokens:
            for status in ("queued", "running"):
                items = await asyncio.to_thread(http.all_pages, 0, f"/api/runs/?status={status}&limit=200", token)
                active += [(r["runId"], r["status"]) for r in items]
        if not active:
            break
        if set(active) != previous:
            previous, last_change = set(active), time.monotonic()
        elif time.monotonic() - last_change > still:
            break
        await asyncio.sleep(2)
    return time.monotonic() - started


def _parse_time(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def log_sizes(stack: Stack) -> dict[str, int]:
    return {name: len(text) for name, text in stack.logs().items()}


def log_findings(stack: Stack, since: dict[str, int]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for name, text in stack.logs().items():
        new = text[since.get(name, 0):]
        for label, pattern in LOG_PATTERNS.items():
            hits = pattern.findall(new)
            if hits:
                entry = found.setdefault(label, {"count": 0, "where": Counter(), "example": ""})
                entry["count"] += len(hits)
                entry["where"][name] += len(hits)
                if not entry["example"]:
                    match = pattern.search(new)
                    line_start = new.rfind("\n", 0, match.start()) + 1
                    entry["example"] = f"{name}: " + new[line_start: new.find("\n", match.end())][:240]
    for entry in found.values():
        entry["where"] = dict(entry["where"])
    return found


async def _create_sessions(stack: Stack, http: Http, count: int, agent: str = "default") -> list[tuple[str, str]]:
    tokens = stack.tokens
    semaphore = asyncio.Semaphore(16)

    async def one(i: int) -> tuple[str, str]:
        token = tokens[(i // SESSIONS_PER_USER) % len(tokens)]
        async with semaphore:
            status, body = await http(i % stack.servers, "POST", "/api/sessions/", token, {"title": f"load {i}", "agent": agent})
        if status != 201:
            raise RuntimeError(f"POST /api/sessions/: {status} {body}")
        return body["sessionId"], token

    return await asyncio.gather(*(one(i) for i in range(count)))


async def _phase(stack: Stack, http: Http, sessions: int, turns: int, timeout: float, model: str = "scripted", ramp: float = 0.0) -> dict:
    created = await _create_sessions(stack, http, sessions, "wire" if model == "wire" else "default")
    clients = [Client(i, sid, token, i % stack.servers, (i + 1) % stack.servers) for i, (sid, token) in enumerate(created)]
    sockets = [SessionSocket(stack, c) for c in clients]
    for chunk in range(0, len(sockets), 25):
        await asyncio.gather(*(s.open() for s in sockets[chunk: chunk + 25]))
    status_before = {}
    for client in clients:
        status, meta = await http(client.http_server, "GET", f"/api/sessions/{client.session_id}/", client.token)
        status_before[client.session_id] = meta.get("entryCount", 0) if status == 200 else 0
        client.start_entries = status_before[client.session_id]
    # while the stack idles: the shared MariaDB's background rate, and the stack's own CPU
    idle0 = await asyncio.to_thread(stack.sample)
    q0, t0 = stack.questions(), time.monotonic()
    await asyncio.sleep(3)
    q1 = stack.questions()
    idle1 = await asyncio.to_thread(stack.sample)
    idle_s = time.monotonic() - t0
    background = (q1.get("Questions", 0) - q0.get("Questions", 0)) / idle_s if q0 else 0.0
    idle_cpu = 1000 * (sum(idle1["cpu"].values()) - sum(idle0["cpu"].values())) / idle_s
    logs0 = log_sizes(stack)
    before = await asyncio.to_thread(stack.sample)
    go = asyncio.Event()
    tasks = [asyncio.create_task(drive(http, c, turns, timeout, go, ramp * i / sessions)) for i, c in enumerate(clients)]
    held = [0]
    sampling = asyncio.create_task(_sample_connections(stack, held))
    started = time.monotonic()
    go.set()
    await asyncio.gather(*tasks)
    window = time.monotonic() - started
    drained = await _drain(http, stack, clients)
    sampling.cancel()
    await asyncio.sleep(1)  # the last events of runs that ended in the drain
    after = await asyncio.to_thread(stack.sample)
    for s in sockets:
        await s.close()
    findings = log_findings(stack, logs0)

    # what the server did, from its rows
    runs = []
    for client in clients:
        for run in await asyncio.to_thread(http.all_pages, 0, f"/api/runs/?session={client.session_id}&limit=200", client.token):
            runs.append(run)
    finals = []
    for client in clients:
        status, meta = await http(client.http_server, "GET", f"/api/sessions/{client.session_id}/", client.token)
        finals.append(meta if status == 200 else {})
    result = summarize(stack, clients, runs, finals, before, after, window, background, idle_cpu, findings, sessions, turns)
    result["drain_s"] = drained
    result["model"] = model
    result["ramp_s"] = ramp
    result["connections_peak"] = held[0] if stack.mode == "distributed" else None
    result["in_flight_peak"] = _in_flight_peak(runs)
    result["load"] = _loadavg()
    return result


async def _sample_connections(stack: Stack, held: list[int]) -> None:
    """The most connections MariaDB had open to the stack's database, sampled twice a second."""
    if stack.mode != "distributed":
        return
    while True:
        try:
            held[0] = max(held[0], await asyncio.to_thread(stack.connections))
        except Exception:  # noqa: BLE001 - a sample missed is not a failed phase
            pass
        await asyncio.sleep(0.5)


def _in_flight_peak(runs: list[dict]) -> int:
    """The most runs running at one moment (their startedAt .. finishedAt)."""
    edges = []
    for run in runs:
        start, end = _parse_time(run.get("startedAt")), _parse_time(run.get("finishedAt"))
        if start is not None and end is not None:
            edges += [(start, 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(edges):
        running += step
        peak = max(peak, running)
    return peak


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "-"


def summarize(stack, clients, runs, finals, before, after, window, background, idle_cpu, findings, sessions, turns) -> dict:
    statuses = Counter(r["status"] for r in runs)
    completed = [r for r in runs if r["status"] == "completed"]
    starts = [_parse_time(r["createdAt"]) for r in runs]
    ends = [_parse_time(r["finishedAt"]) for r in completed if r["finishedAt"]]
    span = (max(ends) - min(starts)) if ends and starts else float("nan")
    all_turns = [t for c in clients for t in c.turns]
    outcomes = Counter(t.outcome for t in all_turns)
    n_done = sum(1 for t in all_turns if t.done is not None)
    n_completed = max(len(completed), 1)
    cpu = {name: (after["cpu"].get(name, 0) - before["cpu"].get(name, 0)) / n_completed for name in after["cpu"]}
    shared_cpu = {name: (after["shared_cpu"][name] - before["shared_cpu"].get(name, 0)) / n_completed for name in after["shared_cpu"]}
    statements = (after["statements"][0] - before["statements"][0]) / n_completed
    connections = (after["statements"][1] - before["statements"][1]) / n_completed
    questions = None
    if after["questions"]:
        raw = after["questions"]["Questions"] - before["questions"]["Questions"]
        questions = {
            "raw": raw / n_completed,
            "corrected": (raw - background * window) / n_completed,
            "background_per_s": background,
            **{k: (after["questions"][k] - before["questions"][k]) / n_completed for k in after["questions"] if k != "Questions"},
        }
    lost_revisions = dup_revisions = 0
    entries_written = entries_seen = 0
    for client, final in zip(clients, finals):
        expected = set(range(client.start_revision + 1, final.get("revision", client.start_revision) + 1))
        seen = client.revisions
        lost_revisions += len(expected - set(seen))
        dup_revisions += len(seen) - len(set(seen))
        entries_written += final.get("entryCount", client.start_entries) - client.start_entries
        entries_seen += client.entries_added
    by_id = {r["runId"]: r for r in runs}
    never = sum(1 for c in clients for t in c.turns
                if t.run_id and by_id.get(t.run_id, {}).get("status") in TERMINAL and t.run_id not in c.terminal)  # fmt: skip
    closes = Counter()
    for client in clients:
        closes.update({str(k): v for k, v in client.closes.items()})
    http_errors = Counter(t.outcome for t in all_turns if t.outcome.startswith("http"))
    return {
        "mode": stack.mode,
        "sessions": sessions,
        "turns": turns,
        "window_s": window,
        "turns_attempted": len(all_turns),
        "turns_not_attempted": sessions * turns - len(all_turns),
        "runs": dict(statuses),
        "server_turns_per_s": len(completed) / span if span and span == span and span > 0 else float("nan"),
        "client_turns_per_s": n_done / window if window else float("nan"),
        "ack_ms": _p(t.ack for t in all_turns),
        "ack_queued_ms": _p(t.queued for t in all_turns),
        "ack_to_run_ms": _p(t.to_run for t in all_turns),
        "first_delta_ms": _p(t.first_delta for t in all_turns),
        "done_ms": _p(t.done for t in all_turns),
        "later_done_ms": _p(t.done for c in clients for t in c.turns[1:]),
        "cpu_ms_per_turn": {k: v * 1000 for k, v in cpu.items()},
        "shared_cpu_ms_per_turn": {k: v * 1000 for k, v in shared_cpu.items()},
        "statements_per_turn": statements,
        "connections_per_turn": connections,
        "idle_cpu_ms_per_s": idle_cpu,
        "questions_per_turn": questions,
        "outcomes": dict(outcomes),
        "http_errors": dict(http_errors),
        "stuck_runs": statuses.get("queued", 0) + statuses.get("running", 0),
        "failed_runs": statuses.get("failed", 0) + statuses.get("lost", 0),
        "run_errors": Counter(r["error"][:160] for r in runs if r.get("error")).most_common(3),
        "run_state_missing": outcomes.get("run_state missing", 0),
        "run_state_never": never,
        "socket_closes": dict(closes),
        "reconnects": sum(c.reconnects for c in clients),
        "lost_revisions": lost_revisions,
        "duplicate_revisions": dup_revisions,
        "entries_written": entries_written,
        "entries_seen": entries_seen,
        "rss_mb": {k: v / 2**20 for k, v in after["rss"].items()},
        "logs": findings,
        "client_errors": [c.error for c in clients if c.error][:3],
    }


def _wall_time(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def _p(values) -> tuple[float, float]:
    ms = [v * 1000 for v in values if v is not None]
    return (percentile(ms, 50), percentile(ms, 95)) if ms else (float("nan"), float("nan"))


# --------------------------------------------------------------------------- memory


async def _memory(stack: Stack, http: Http, sessions: int, turns: int, timeout: float) -> dict:
    rss = [("start", (await asyncio.to_thread(stack.sample))["rss"])]
    started = time.monotonic()
    created = await _create_sessions(stack, http, sessions)
    create_s = time.monotonic() - started
    rss.append((f"after {sessions} sessions", (await asyncio.to_thread(stack.sample))["rss"]))
    active = min(50, len(created))
    per = math.ceil(turns / active)
    clients = [Client(i, sid, token, i % stack.servers, (i + 1) % stack.servers) for i, (sid, token) in enumerate(created[:active])]
    sockets = [SessionSocket(stack, c) for c in clients]
    for chunk in range(0, len(sockets), 25):
        await asyncio.gather(*(s.open() for s in sockets[chunk: chunk + 25]))
    go = asyncio.Event()
    go.set()
    started = time.monotonic()
    await asyncio.gather(*(drive(http, c, per, timeout, go) for c in clients))
    turn_s = time.monotonic() - started
    for s in sockets:
        await s.close()
    done = sum(1 for c in clients for t in c.turns if t.outcome == "ok")
    rss.append((f"after {done} turns", (await asyncio.to_thread(stack.sample))["rss"]))
    return {"mode": stack.mode, "sessions": sessions, "turns": done, "create_s": create_s, "turn_s": turn_s,
            "rss_mb": [(label, {k: v / 2**20 for k, v in r.items()}) for label, r in rss]}  # fmt: skip


# --------------------------------------------------------------------------- output


def _fmt(value, digits=1) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:.{digits}f}"


def table(results: list[dict]) -> str:
    heads = [f"{r['mode'][:5]} {r.get('model', 'scripted')[:4]} {r['sessions']}x{r['turns']}" + (f" ramp {r['ramp_s']:g}s" if r.get("ramp_s") else "")
             for r in results]

    def row(label, fn):
        return [label, *(fn(r) for r in results)]

    names = sorted({k for r in results for k in r["cpu_ms_per_turn"]})
    shared = sorted({k for r in results for k in r["shared_cpu_ms_per_turn"]})
    rows = [
        row("turns/s server (runs)", lambda r: _fmt(r["server_turns_per_s"], 2)),
        row("turns/s client (run_state)", lambda r: _fmt(r["client_turns_per_s"], 2)),
        row("ack p50/p95 ms", lambda r: f"{_fmt(r['ack_ms'][0], 0)}/{_fmt(r['ack_ms'][1], 0)}"),
        row("  waiting for a bench thread", lambda r: f"{_fmt(r['ack_queued_ms'][0], 0)}/{_fmt(r['ack_queued_ms'][1], 0)}"),
        row("  request sent -> run row", lambda r: f"{_fmt(r['ack_to_run_ms'][0], 0)}/{_fmt(r['ack_to_run_ms'][1], 0)}"),
        row("first delta p50/p95 ms", lambda r: f"{_fmt(r['first_delta_ms'][0], 0)}/{_fmt(r['first_delta_ms'][1], 0)}"),
        row("done p50/p95 ms", lambda r: f"{_fmt(r['done_ms'][0], 0)}/{_fmt(r['done_ms'][1], 0)}"),
        row("  turns after the first", lambda r: f"{_fmt(r['later_done_ms'][0], 0)}/{_fmt(r['later_done_ms'][1], 0)}"),
        row("in-flight sessions (peak)", lambda r: str(r.get("in_flight_peak", "-"))),
        row("DB connections held (peak)", lambda r: "-" if r.get("connections_peak") is None else str(r["connections_peak"])),
        row("load average after", lambda r: r.get("load", "-")),
        row("CPU ms/turn, all stack", lambda r: _fmt(sum(r["cpu_ms_per_turn"].values()), 0)),
        *(row(f"  {n}", lambda r, n=n: _fmt(r["cpu_ms_per_turn"].get(n), 0)) for n in names),
        *(row(f"  {n}", lambda r, n=n: _fmt(r["shared_cpu_ms_per_turn"].get(n), 0)) for n in shared),
        row("statements/turn (drivers)", lambda r: _fmt(r["statements_per_turn"], 0)),
        row("DB connections/turn", lambda r: _fmt(r["connections_per_turn"], 1)),
        row("Questions/turn* raw/-bg", lambda r: (f"{_fmt(r['questions_per_turn']['raw'], 0)}/{_fmt(r['questions_per_turn']['corrected'], 0)}"
                                                   if r["questions_per_turn"] else "-")),
        row("runs completed/failed/lost", lambda r: f"{r['runs'].get('completed', 0)}/{r['runs'].get('failed', 0)}/{r['runs'].get('lost', 0)}"),
        row("stuck runs after drain q/r", lambda r: f"{r['runs'].get('queued', 0)}/{r['runs'].get('running', 0)}"),
        row("turns timed out (client)", lambda r: str(sum(v for k, v in r["outcomes"].items() if k in ("still queued", "timeout")))),
        row("turns not attempted", lambda r: str(r["turns_not_attempted"])),
        row("HTTP errors", lambda r: str(sum(r["http_errors"].values()))),
        row("run_state missing at timeout", lambda r: str(r["run_state_missing"])),
        row("run_state never received", lambda r: str(r["run_state_never"])),
        row("socket closes (codes)", lambda r: ",".join(f"{k}:{v}" for k, v in r["socket_closes"].items()) or "0"),
        row("tree revisions lost", lambda r: str(r["lost_revisions"])),
        row("entries written/seen", lambda r: f"{r['entries_written']}/{r['entries_seen']}"),
        row("log: deadlock 1213", lambda r: str(r["logs"].get("deadlock 1213", {}).get("count", 0))),
        row("log: ChannelFull/over cap.", lambda r: f"{r['logs'].get('ChannelFull', {}).get('count', 0)}/{r['logs'].get('over capacity', {}).get('count', 0)}"),
        row("log: TimeoutError", lambda r: str(r["logs"].get("TimeoutError", {}).get("count", 0))),
        row("log: Tracebacks", lambda r: str(r["logs"].get("Traceback", {}).get("count", 0))),
        row("window s (+ drain s)", lambda r: f"{_fmt(r['window_s'], 0)} (+{_fmt(r.get('drain_s'), 0)})"),
    ]  # fmt: skip
    widths = [max(len(x[i]) for x in [["", *heads], *rows]) for i in range(len(heads) + 1)]
    lines = ["| " + " | ".join(v.ljust(w) for v, w in zip(["", *heads], widths)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join(lines)


def details(results: list[dict]) -> str:
    out = []
    for r in results:
        bits = [f"stack idle CPU {r['idle_cpu_ms_per_s']:.0f} ms/s; RSS MB after: "
                + ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["rss_mb"].items()))]
        if r["outcomes"].keys() - {"ok"}:
            bits.append(f"turn outcomes {r['outcomes']}")
        if r["run_errors"]:
            bits.append(f"run errors {r['run_errors']}")
        if r["client_errors"]:
            bits.append(f"client errors {r['client_errors']}")
        if r["questions_per_turn"]:
            q = r["questions_per_turn"]
            bits.append("MariaDB per turn: " + ", ".join(f"{k} {v:.1f}" for k, v in q.items() if k not in ("raw", "corrected")))
        for label, f in r["logs"].items():
            bits.append(f"log {label}: {f['count']} {f['where']} e.g. {f['example']}")
        if bits:
            out.append(f"{r['mode']} {r['sessions']}x{r['turns']}:\n    " + "\n    ".join(bits))
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def _start_provider(args) -> tuple[subprocess.Popen, str]:
    """The fake provider (bench/fake_provider.py) in a process of its own; (process, base URL)."""
    process = subprocess.Popen([sys.executable, "-m", "bench.fake_provider", "--seconds", str(args.wire_seconds),
                                "--rate", str(args.wire_rate)], cwd=REPO, stdout=subprocess.PIPE, text=True)  # fmt: skip
    line = process.stdout.readline().split()
    if not line or line[0] != "ready":
        raise RuntimeError(f"the fake provider did not start: {line}")
    return process, f"http://127.0.0.1:{line[1]}"


async def _run(modes: list[str], args) -> tuple[list[dict], list[dict]]:
    """Every stack up at once; each phase (model, session count) runs mode after mode, so the
    modes are measured alternately in one sitting, under the same load of the machine."""
    provider, url = _start_provider(args) if "wire" in args.models else (None, "")
    load = {"bench clients*": os.getpid(), **({"fake provider*": provider.pid} if provider else {})}
    stacks = {mode: Stack(mode, worker_concurrency=args.worker_concurrency, worker_processes=args.worker_processes,
                          worker_pool=args.worker_pool, keep=args.keep, load_pids=load, extra_env=args.env) for mode in modes}  # fmt: skip
    results, memories = [], []
    try:
        https = {}
        for mode, stack in stacks.items():
            t = time.monotonic()
            stack.start(wire_url=url)
            biggest = max([*args.sessions, *(args.wire_sessions if provider else []), 50 if args.memory else 1])
            stack.add_users(max(1, math.ceil(biggest / SESSIONS_PER_USER)))
            https[mode] = Http(stack, threads=128)
            print(f"  {mode}: stack up in {time.monotonic() - t:.0f} s (ports {stack.ports}, work dir {stack.workdir})", flush=True)
        plan = [("scripted", n, args.turns) for n in args.sessions if "scripted" in args.models]
        plan += [("wire", n, args.wire_turns) for n in args.wire_sessions if provider]
        for model, n, turns in plan:
            for mode, stack in stacks.items():
                if model == "wire" and args.wire_modes == "distributed" and mode != "distributed":
                    continue
                t = time.monotonic()
                print(f"  {mode} {model} {n}x{turns}: load average {_loadavg()} before", flush=True)
                result = await _phase(stack, https[mode], n, turns, args.turn_timeout, model, args.wire_ramp if model == "wire" else 0.0)
                results.append(result)
                print(f"  {mode} {model} {n}x{turns}: {result['runs']} client {result['client_turns_per_s']:.2f} turns/s, "
                      f"server {result['server_turns_per_s']:.2f} turns/s, done p50/p95 {result['done_ms'][0]:.0f}/"
                      f"{result['done_ms'][1]:.0f} ms ({time.monotonic() - t:.0f} s)", flush=True)  # fmt: skip
        if args.memory:
            for mode, stack in stacks.items():
                s, m = args.memory
                memories.append(await _memory(stack, https[mode], s, m, args.turn_timeout))
        for mode, stack in stacks.items():
            if args.keep:
                print(f"  {mode}: kept {stack.workdir}")
            https[mode].pool.shutdown(wait=False, cancel_futures=True)
    finally:
        for stack in stacks.values():
            await asyncio.to_thread(stack.stop)
        if provider:
            provider.kill()
            provider.wait()
    return results, memories


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.product_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["embedded", "distributed", "both"], default="both")
    parser.add_argument("--sessions", default="1,10,50", help="session counts, comma-separated")
    parser.add_argument("--turns", type=int, default=5, help="turns per session")
    parser.add_argument("--turn-timeout", type=float, default=120, help="seconds a client waits for a turn's terminal run_state")
    parser.add_argument("--worker-concurrency", type=int, default=200, help="threads per runs worker, as deploy/Procfile (the inline pool is NETA_INLINE_WORKERS, default 64)")
    parser.add_argument("--worker-processes", type=int, default=2, help="runs worker processes (one per core)")
    parser.add_argument("--worker-pool", choices=["threads", "prefork"], default="threads",
                        help="the runs workers' pool: threads (deploy/Procfile) or prefork (for comparison)")
    parser.add_argument("--models", default="scripted", help="scripted (the demo model, ~2 s a turn), wire (the fake provider), or both: scripted,wire")
    parser.add_argument("--wire-sessions", default="300", help="session counts on the fake provider, comma-separated")
    parser.add_argument("--wire-turns", type=int, default=1, help="turns per session on the fake provider")
    parser.add_argument("--wire-modes", default="both", choices=["both", "distributed"], help="the modes of the fake provider's phases")
    parser.add_argument("--wire-seconds", type=float, default=20.0, help="how long the fake provider streams a reply")
    parser.add_argument("--wire-rate", type=float, default=25.0, help="the fake provider's text deltas a second")
    parser.add_argument("--wire-ramp", type=float, default=0.0,
                        help="seconds over which the wire sessions' first prompts are spread (0: all at once, a burst)")
    parser.add_argument("--memory", default="", help="S,T: also create S sessions and run T turns and print RSS (e.g. 5000,1000)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every process of the stacks (repeatable), e.g. NETA_HTTP_THREADS=8")
    parser.add_argument("--json", default="", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs (logs, SQLite, session files)")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    try:
        args.sessions = [int(s) for s in args.sessions.split(",") if s.strip()]
        args.wire_sessions = [int(s) for s in args.wire_sessions.split(",") if s.strip()]
        args.models = [m.strip() for m in args.models.split(",") if m.strip()]
        args.memory = tuple(int(x) for x in args.memory.split(",")) if args.memory else None
    except ValueError:
        parser.error("--sessions and --memory take integers separated by commas")
    if any("=" not in item for item in args.env):
        parser.error("--env takes NAME=VALUE")
    args.env = dict(item.split("=", 1) for item in args.env)
    if args.wire_ramp < 0:
        parser.error("--wire-ramp takes seconds, 0 or more")
    if any(n < 1 for n in args.sessions) or args.turns < 1 or (args.memory and (len(args.memory) != 2 or min(args.memory) < 1)):
        parser.error("session counts, --turns and --memory must be positive (--memory is SESSIONS,TURNS)")
    modes = ["embedded", "distributed"] if args.mode == "both" else [args.mode]
    if "distributed" in modes and (why := services_available()):
        if args.mode == "distributed":
            sys.exit(f"distributed mode needs MariaDB and Redis: {why}")
        print(f"distributed mode left out: {why}")
        modes.remove("distributed")
    print(f"product load: sessions {args.sessions} x {args.turns} turns, modes {modes}; {machine()}", flush=True)
    if set(args.models) - {"scripted", "wire"} or not args.models:
        parser.error("--models takes scripted, wire or both")
    results, memories = asyncio.run(_run(modes, args))
    print(f"\nproduct load ({machine()}); * = shared server, other work on the machine counts too\n")
    print(table(results))
    text = details(results)
    if text:
        print("\n" + text)
    for m in memories:
        print(f"\nRSS MB, {m['mode']} ({m['sessions']} sessions created in {m['create_s']:.0f} s, {m['turns']} turns in {m['turn_s']:.0f} s):")
        for label, rss in m["rss_mb"]:
            print(f"  {label:<24} " + "  ".join(f"{k} {v:.0f}" for k, v in sorted(rss.items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "memory": memories, "machine": machine()}, indent=1, default=str))


if __name__ == "__main__":
    main()
