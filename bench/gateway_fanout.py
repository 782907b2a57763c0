"""Realtime fan-out: N websocket clients on one session while a turn streams.

    python -m bench.gateway_fanout [--clients 200] [--modes inline,celery] [--client-procs 4]

Modes (real processes, see tests/support/deployment.py):

* ``inline`` — the embedded default: one Daphne, in-memory channel layer, the
  run on the web process's thread pool, SQLite.
* ``celery`` — distributed: one Daphne, one Celery worker, the Redis channel
  layer, MariaDB.

For each mode a baseline turn with 1 client runs first, then the same turn with
N clients. Printed per run: whether every client received every tree event
(revisions before+1..after, in order), frames delivered, the delay from the
producer handing an event to the gateway (``emittedAt``, NETA_REALTIME_TRACE)
to the client receiving it (p50/p95, tree and streaming events), and the
server-side CPU (Daphne + worker, all processes) per delivered frame, with the
ratio against the baseline. Clients run in separate processes so the client
side is not the bottleneck being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.deployment import Deployment as Cluster  # noqa: E402
from tests.support.deployment import cleanup_workdir  # noqa: E402
from tests.support.services import mariadb_available, redis_available  # noqa: E402

TREE_TYPES = {
    "session_entry_added",
    "session_entry_updated",
    "session_leaf_changed",
    "session_branch_summary_added",
    "session_compaction_added",
}
TERMINAL = ("completed", "aborted", "failed", "lost")
LONG_TEXT = " ".join(f"token{i:04d}" for i in range(300))  # ~3000 characters
RULES = {
    "version": 1,
    "rules": [{"match": {"contains": "stream"}, "reply": {"delay_ms": 8, "chunk_size": 6, "steps": [{"text": LONG_TEXT}]}}],
    "default": {"reply": "ok"},
}


# --------------------------------------------------------------------------- clients (child processes)


async def _client(url: str, origin: str, token: str, since: int, subscribed: asyncio.Event, counter: list, total: int) -> dict:
    import websockets

    async with websockets.connect(
        url, additional_headers={"Authorization": f"Token {token}"}, origin=origin, max_size=None, open_timeout=60
    ) as ws:
        json.loads(await ws.recv())  # hello
        await ws.send(json.dumps({"type": "subscribe", "sinceRevision": since}))
        while json.loads(await ws.recv())["type"] != "subscribed":
            pass
        counter[0] += 1
        if counter[0] == total:
            subscribed.set()
        revisions, tree_delays, stream_delays, frames = [], [], [], 0
        while True:
            raw = await ws.recv()
            now = time.time()
            frame = json.loads(raw)
            frames += 1
            kind = frame.get("type")
            if kind in TREE_TYPES:
                revisions.append(frame["revision"])
                if "emittedAt" in frame:
                    tree_delays.append(now - frame["emittedAt"])
            elif "emittedAt" in frame:
                stream_delays.append(now - frame["emittedAt"])
            if kind == "run_state" and frame.get("state") in TERMINAL:
                return {"revisions": revisions, "tree": tree_delays, "stream": stream_delays, "frames": frames}


def _client_process(url, origin, token, since, count, ready, results):
    async def main():
        subscribed = asyncio.Event()
        counter = [0]
        tasks = [asyncio.create_task(_client(url, origin, token, since, subscribed, counter, count)) for _ in range(count)]
        await subscribed.wait()
        ready.put(count)
        return await asyncio.gather(*tasks)

    results.put(asyncio.run(main()))


# --------------------------------------------------------------------------- one measured turn


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(cluster: Cluster, session_id: str, clients: int, procs: int) -> dict:
    status, snapshot = cluster.http(0, "get", f"/api/sessions/{session_id}/snapshot/")
    assert status == 200, snapshot
    since = snapshot["revision"]
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    procs = max(1, min(procs, clients))
    sizes = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    workers = [
        ctx.Process(
            target=_client_process,
            args=(cluster.ws_url(0, session_id), cluster.origin(0), cluster.token, since, n, ready, results),
        )
        for n in sizes
    ]
    for worker in workers:
        worker.start()
    subscribed = sum(ready.get(timeout=120) for _ in workers)
    assert subscribed == clients
    cpu0, t0 = cluster.cpu_seconds(), time.monotonic()
    status, body = cluster.http(0, "post", f"/api/sessions/{session_id}/prompt/", {"text": "stream please"})
    assert status == 202, body
    per_client = [c for _ in workers for c in results.get(timeout=300)]
    wall, cpu = time.monotonic() - t0, cluster.cpu_seconds() - cpu0
    for worker in workers:
        worker.join(timeout=30)
    status, after = cluster.http(0, "get", f"/api/sessions/{session_id}/snapshot/")
    expected = list(range(since + 1, after["revision"] + 1))
    complete = sum(1 for c in per_client if c["revisions"] == expected)
    frames = sum(c["frames"] for c in per_client)
    tree = [d for c in per_client for d in c["tree"]]
    stream = [d for c in per_client for d in c["stream"]]
    return {
        "clients": clients,
        "treeEvents": len(expected),
        "complete": complete,
        "frames": frames,
        "framesPerClient": frames / clients,
        "wall": wall,
        "cpu": cpu,
        "cpuPerFrameUs": cpu / frames * 1e6,
        "treeP50": percentile(tree, 0.5) * 1000,
        "treeP95": percentile(tree, 0.95) * 1000,
        "streamP50": percentile(stream, 0.5) * 1000,
        "streamP95": percentile(stream, 0.95) * 1000,
    }


PUBSUB_SETTINGS = """
from neta.settings import *  # noqa: F401,F403
CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                              "CONFIG": {"hosts": [NETA_REDIS_URL], "prefix": NETA_CHANNELS_PREFIX}}}
"""


def run_mode(mode: str, clients: int, procs: int, redis_layer: str = "core") -> list[dict]:
    workdir = Path(tempfile.mkdtemp(prefix=f"neta-bench-gateway-{mode}-"))
    config = {
        "inline": {"servers": 1, "workers": 0, "database": "sqlite", "redis": False, "backend": "inline"},
        "celery": {"servers": 1, "workers": 1, "database": "mysql", "redis": True, "backend": "celery"},
    }[mode]
    env = {"NETA_REALTIME_TRACE": "true"}
    if mode == "celery" and redis_layer == "pubsub":
        # The same deployment on channels_redis' pub/sub layer (one PUBLISH per group message).
        (workdir / "bench_pubsub_settings.py").write_text(PUBSUB_SETTINGS)
        env.update({"DJANGO_SETTINGS_MODULE": "bench_pubsub_settings", "PYTHONPATH": str(workdir)})
    try:
        with Cluster(workdir, rules=RULES, extra_env=env, **config) as cluster:
            status, session = cluster.http(0, "post", "/api/sessions/", {})
            assert status == 201, session
            return [measure(cluster, session["sessionId"], n, procs) for n in (1, clients)]
    finally:
        cleanup_workdir(workdir)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--modes", default="inline,celery")
    parser.add_argument("--client-procs", type=int, default=4)
    parser.add_argument("--redis-layer", choices=["core", "pubsub"], default="core", help="channels_redis layer for the celery mode")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "celery" in modes and not (mariadb_available() and redis_available()):
        print("celery mode needs MariaDB and Redis on 127.0.0.1; skipped")
        modes.remove("celery")
    print(
        f"gateway fan-out: {args.clients} clients on one session, one streamed turn (~{len(LONG_TEXT)} chars); "
        f"redis layer: {args.redis_layer}"
    )
    print(f"{'mode':8} {'clients':>7} {'tree ev':>7} {'complete':>9} {'frames':>8} {'fr/cl':>6} "
          f"{'tree p50/p95 ms':>16} {'stream p50/p95 ms':>18} {'cpu s':>6} {'cpu/frame µs':>12}")  # fmt: skip
    for mode in modes:
        baseline, full = run_mode(mode, args.clients, args.client_procs, args.redis_layer)
        for row in (baseline, full):
            print(
                f"{mode:8} {row['clients']:>7} {row['treeEvents']:>7} {row['complete']:>4}/{row['clients']:<4} "
                f"{row['frames']:>8} {row['framesPerClient']:>6.1f} "
                f"{row['treeP50']:>7.1f}/{row['treeP95']:<8.1f} {row['streamP50']:>8.1f}/{row['streamP95']:<9.1f} "
                f"{row['cpu']:>6.2f} {row['cpuPerFrameUs']:>12.1f}"
            )
        extra_frames = full["frames"] - baseline["frames"]
        marginal = (full["cpu"] - baseline["cpu"]) / extra_frames * 1e6 if extra_frames > 0 else float("nan")
        print(
            f"  {mode}: fan-out cost {marginal:.1f} µs server CPU per extra delivered frame "
            f"(({full['cpu']:.2f}-{baseline['cpu']:.2f}) s / {extra_frames} frames); "
            f"p95 stream delay {full['streamP95'] / max(baseline['streamP95'], 1e-9):.1f}x the 1-client baseline"
        )
        if full["complete"] != full["clients"]:
            print(f"  !! {full['clients'] - full['complete']} client(s) missed tree events in mode {mode}")


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
    main()
