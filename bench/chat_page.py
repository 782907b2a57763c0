"""The chat page with a 10k-entry session in headless Chromium against a real Daphne.

    python -m bench.chat_page [--entries 10000] [--snapshot-limit 10000]

Prints, with its targets: first paint of the conversation (≤ 1 s), tree sidebar
interactive (≤ 1.5 s), and long tasks (> 50 ms) on the main thread while a reply
streams at 50 deltas per second (none). Also: the same page on a 20-entry session
as the baseline, and how long one keyboard step in the 10k tree takes. Last
(``--subagents 0`` skips it): a real delegate batch of 8 child processes streaming
at once with every row open, and the long tasks while they stream (none; see
bench/chat_subagents.py). Uses a throwaway state directory; never the user's data.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support import browser as browser_support
from tests.support.browser import CHROMIUM, CHROMIUM_FLAGS, Site, browser_deployment, login

STREAM_DELTAS = 500  # 10 s at 50 deltas/s
BENCH_RULE = {"match": {"contains": "bench stream"}, "reply": [{"text": "word " * (STREAM_DELTAS * 4 // 5), "chunk_size": 4, "delay_ms": 20}]}

LONGTASKS = """
window.__longtasks = [];
try {
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push({start: e.startTime, duration: e.duration}); })
    .observe({type: 'longtask', buffered: true});
} catch (e) {}
"""


def pi_session_file(path: Path, entries: int, seed: int = 7) -> str:
    """A Pi v3 session file: a long conversation with tool calls, markdown and a few branches."""
    rng = random.Random(seed)
    session_id = "0199aaaa-bbbb-7ccc-8ddd-%012d" % entries
    lines = [{"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/workspace"}]
    ids: list[str] = []
    parent = None
    n = 0

    def add(entry: dict) -> str:
        nonlocal parent, n
        n += 1
        entry_id = f"{n:08x}"
        entry = {"type": entry.pop("type"), "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **entry}
        lines.append(entry)
        ids.append(entry_id)
        parent = entry_id
        return entry_id

    usage = {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280, "cost": {"input": 0.0036, "output": 0.0012, "cacheRead": 0, "cacheWrite": 0, "total": 0.0048}}
    branch_points: list[str] = []
    while n < entries:
        turn = n // 4
        add({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": f"Question {turn}: how does part {turn % 17} work?"}], "timestamp": 1}})
        if rng.random() < 0.01:
            branch_points.append(parent)
        call = f"call_{n}"
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "Looking at the file first."}, {"type": "text", "text": "Let me read it."}, {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"src/part_{turn % 17}.py"}}], "api": "scripted", "provider": "scripted", "model": "scripted", "usage": usage, "stopReason": "toolUse", "timestamp": 2}})
        add({"type": "message", "message": {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "def part():\n    return 42\n" * 5}], "isError": False, "timestamp": 3}})
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"## Part {turn % 17}\n\nIt **returns** `42`:\n\n```python\ndef part():\n    return 42\n```\n\n- simple\n- tested\n"}], "api": "scripted", "provider": "scripted", "model": "scripted", "usage": usage, "stopReason": "stop", "timestamp": 4}})
        if branch_points and rng.random() < 0.02 and n < entries - 50:
            parent = branch_points.pop()  # continue from an earlier point: a branch
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines[: entries + 1]), encoding="utf-8")
    return session_id


IMPORT = """
from django.contrib.auth import get_user_model
from runtime.sessions.services import session_import
from pathlib import Path
meta = session_import(path=Path({path!r}), actor=get_user_model().objects.get(username="alice"), agent_name="browser", provider_kind="file")
print(meta.session_id, meta.entry_count)
"""


def measure_page(browser, base_url: str, session_id: str, *, stream: bool) -> dict:
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(60_000)
    login(page, base_url)
    page.add_init_script(LONGTASKS)
    page.goto(f"{base_url}/sessions/{session_id}/")
    page.wait_for_selector("html[data-conversation-ready]")
    page.wait_for_selector("html[data-tree-ready]")
    marks = page.evaluate(
        """() => ({
          paint: performance.getEntriesByName('neta:conversation-painted')[0]?.startTime,
          tree: performance.getEntriesByName('neta:tree-interactive')[0]?.startTime,
          rows: Number(document.documentElement.dataset.treeReady),
          fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
          entries: window.neta.store.snapshot.entries.length,
        })"""
    )
    # One keyboard step in the tree: from the key press to the next frame with the new selection.
    page.get_by_role("tree").focus()
    steps = []
    for _ in range(5):
        steps.append(
            page.evaluate(
                """() => new Promise((done) => {
                  const tree = document.querySelector('[role=tree]');
                  const t0 = performance.now();
                  tree.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowUp', bubbles: true}));
                  requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
                })"""
            )
        )
    marks["treeStepMs"] = statistics.median(steps)
    before = page.evaluate("() => window.__longtasks.length")
    marks["longTasksLoading"] = page.evaluate("() => window.__longtasks.map((t) => Math.round(t.duration))")
    if stream:
        page.evaluate("""() => {
          const store = window.neta.store; const receive = store.receive.bind(store); window.__frames = [];
          store.receive = (frame) => { const t = performance.now(); receive(frame); window.__frames.push({t, type: frame.type + (frame.inFlight === false ? ':final' : frame.inFlight ? ':inflight' : ''), ms: performance.now() - t}); };
        }""")
        page.fill("#composer-input", "bench stream please")
        page.press("#composer-input", "Enter")
        page.wait_for_selector(".msg-streaming")
        t0 = page.evaluate("() => performance.now()")
        frames0 = page.evaluate("() => window.neta.connection.frames.in")
        page.wait_for_function("() => !document.querySelector('.msg-streaming') && !window.neta.store.running", timeout=120_000)
        t1 = page.evaluate("() => performance.now()")
        frames = page.evaluate("() => window.neta.connection.frames.in") - frames0
        tasks = page.evaluate(f"() => window.__longtasks.slice({before}).filter((t) => t.start >= {t0})")
        slow = page.evaluate("() => window.__frames.filter((f) => f.ms > 20).map((f) => `${f.type} ${Math.round(f.ms)}ms`)")
        marks["slowFrames"] = slow
        marks.update(
            streamSeconds=(t1 - t0) / 1000,
            framesPerSecond=frames / ((t1 - t0) / 1000),
            longTasksStreaming=len(tasks),
            longestTaskStreamingMs=max((t["duration"] for t in tasks), default=0),
        )
    context.close()
    return marks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--snapshot-limit", type=int, default=10_000, help="NETA_SNAPSHOT_ENTRY_LIMIT of the server (default 2000 in production)")
    parser.add_argument("--subagents", type=int, default=8, help="children of the delegate batch phase (0: skip it)")
    parser.add_argument("--subagent-seconds", type=float, default=15, help="how long each child streams")
    args = parser.parse_args(argv)
    from bench.chat_subagents import measure_real, report_real
    from playwright.sync_api import sync_playwright

    browser_support.RULES["rules"].insert(1, BENCH_RULE)
    var_dir = Path(tempfile.mkdtemp(prefix="neta-bench-chat-"))
    deployment = browser_deployment(var_dir, NETA_STREAM_RATE="50", NETA_SNAPSHOT_ENTRY_LIMIT=str(args.snapshot_limit), NETA_EVENT_LOG_SIZE="1000")
    deployment.prepare()
    server = Site(deployment)
    big = pi_session_file(var_dir / "big.jsonl", args.entries)
    small = pi_session_file(var_dir / "small.jsonl", 20, seed=3)
    t = time.perf_counter()
    big_id = server.python(IMPORT.format(path=str(var_dir / "big.jsonl"))).strip().splitlines()[-1].split()[0]
    print(f"imported {args.entries} entries in {time.perf_counter() - t:.1f} s (session {big_id})")
    small_id = server.python(IMPORT.format(path=str(var_dir / "small.jsonl"))).strip().splitlines()[-1].split()[0]
    assert big_id == big and small_id == small
    base_url = server.start().base_url
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            measure_page(browser, base_url, small_id, stream=False)  # warm up the server and the browser's cache
            baseline = measure_page(browser, base_url, small_id, stream=True)
            runs = [measure_page(browser, base_url, big_id, stream=i == 0) for i in range(3)]
            batch = measure_real(browser, server, base_url, children=args.subagents, seconds=args.subagent_seconds) if args.subagents else None
            browser.close()
    finally:
        deployment.close()
    first = runs[0]
    paint = statistics.median(r["paint"] for r in runs)
    tree = statistics.median(r["tree"] for r in runs)
    print(f"snapshot limit {args.snapshot_limit}: {first['entries']} entries in the browser, {first['rows']} tree rows")
    print(f"first paint of the conversation: {paint:.0f} ms median of 3 (target ≤ 1000); 20-entry baseline {baseline['paint']:.0f} ms; ratio {paint / baseline['paint']:.2f}")
    print(f"tree sidebar interactive:        {tree:.0f} ms median of 3 (target ≤ 1500); baseline {baseline['tree']:.0f} ms")
    print(f"one keyboard step in the tree:   {statistics.median(r['treeStepMs'] for r in runs):.1f} ms (key press to the second frame)")
    print(f"long tasks while loading:        {first['longTasksLoading']} ms")
    print(f"frames handled in > 20 ms:       {first.get('slowFrames')}")
    print(
        f"streaming {first['framesPerSecond']:.0f} frames/s for {first['streamSeconds']:.1f} s: "
        f"{first['longTasksStreaming']} long tasks > 50 ms (longest {first['longestTaskStreamingMs']:.0f} ms); "
        f"baseline {baseline['longTasksStreaming']} (longest {baseline['longestTaskStreamingMs']:.0f} ms)"
    )
    if batch is not None:
        report_real(batch, args.subagents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
