"""The chat page with a delegate batch of 8 children streaming at once.

    python -m bench.chat_subagents [--source real|synthetic] [--children 8] [--seconds 15] [--rate 10]

Opens the page (headless Chromium, a real Daphne on a throwaway state directory) with
every row of the batch expanded, so all N children's streams are drawn, and prints the
long tasks (> 50 ms) on the page's main thread while they stream (target: none), next to
the same page idle for as long (the machine's own noise).

``--source real`` (the default; also the last phase of ``python -m bench chat_page``): a
real delegate turn. A scripted parent calls ``delegate_parallel`` with N tasks; the
subagent host starts N child processes (each its own OS process, scripted model
streaming a long answer at ~20 deltas a second) and publishes their ``subagent_*``
events; the page gets them over its websocket like any user's. On 2 cores the children's
own CPU shares the machine with the browser, so this is the pessimistic figure.

``--source synthetic``: the page alone. An in-flight ``subagent_batch`` entry put into
the store and fed, through the store's ``receive`` (the socket's path), the frames the
host sends for N children (`--rate` merged-delta frames a second each, a tool call and
its result every 20 frames, a heartbeat every 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.chat_page import LONGTASKS
from tests.support.browser import CHROMIUM, CHROMIUM_FLAGS, Site, browser_deployment, login

FEED = """
async ({children, seconds, rate, expand}) => {
  const store = window.neta.store;
  const sid = store.sessionId;
  const parent = store.snapshot.leafId;
  const batchId = 'bench-batch';
  const runs = Array.from({length: children}, (_, i) => ({runId: `bench-run-${i}`, taskIndex: i, agent: 'default', task: `bench task ${i}: look at part ${i} of the workspace`, status: 'running'}));
  const entry = {type: 'subagent_batch', id: 'benchbatch', parentId: parent, timestamp: new Date().toISOString(), batchId, mode: 'parallel', runs, metadata: {toolCallId: 'bench-call', parentRunId: 'bench-parent', state: 'running'}};
  store.receive({type: 'session_entry_added', sessionId: sid, revision: store.snapshot.revision + 1, entry, leafId: entry.id, inFlight: true, context: null});
  const seq = new Array(children).fill(0);
  const send = (i, event, first) => {
    seq[i] += 1; const s = seq[i];
    store.receive({type: 'subagent_event', runId: 'bench-parent', subagentRunId: `bench-run-${i}`, batchId, taskIndex: i, firstSeq: first ?? s, seq: s, event: {...event, seq: s, ts: Date.now()}});
  };
  for (let i = 0; i < children; i++) {
    store.receive({type: 'subagent_run_started', runId: 'bench-parent', subagentRunId: `bench-run-${i}`, batchId, batchEntryId: entry.id, toolCallId: 'bench-call', taskIndex: i, agent: 'default', depth: 1, pid: 1000 + i});
    send(i, {type: 'run_start', agent: 'default', depth: 1, pid: 1000 + i, model: 'bench', tools: []});
  }
  await new Promise((r) => requestAnimationFrame(r));
  if (expand) for (const button of document.querySelectorAll('.subagent-expand')) button.click();
  const frames = [];
  const t0 = performance.now();
  let tick = 0;
  await new Promise((done) => {
    const timer = setInterval(() => {
      tick += 1;
      for (let i = 0; i < children; i++) {
        const t = performance.now();
        const turn = 1 + Math.floor(tick / 20);
        if (tick % 20 === 10) send(i, {type: 'tool_call', turn, toolCallId: `c${i}-${tick}`, name: 'ls', arguments: {path: `part${i}`}, route: 'worker-local'});
        else if (tick % 20 === 11) send(i, {type: 'tool_result', toolCallId: `c${i}-${tick - 1}`, name: 'ls', isError: false, preview: 'a.py\\nb.py\\nREADME.md\\n', truncated: false, chars: 20});
        else if (tick % (2 * rate) === 0) send(i, {type: 'heartbeat', phase: 'model', usage: {input: 100 * tick, output: 10 * tick, totalTokens: 110 * tick, cost: {total: 0.0001 * tick}}, counts: {}});
        else { const first = seq[i] + 1; seq[i] += 3; send(i, {type: 'assistant_delta', turn, contentIndex: 0, kind: 'text', delta: `words of part ${i}, step ${tick}; `.repeat(2)}, first); }
        frames.push(performance.now() - t);
      }
      if (performance.now() - t0 > seconds * 1000) { clearInterval(timer); done(); }
    }, 1000 / rate);
  });
  for (let i = 0; i < children; i++) {
    store.receive({type: 'subagent_run_completed', runId: 'bench-parent', subagentRunId: `bench-run-${i}`, batchId, taskIndex: i, agent: 'default', status: 'completed', errorCode: null, error: null, usage: {totalTokens: 1}, eventCount: seq[i]});
  }
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  frames.sort((a, b) => a - b);
  return {t0, frames: frames.length, p50: frames[Math.floor(frames.length / 2)], p99: frames[Math.floor(frames.length * 0.99)], max: frames[frames.length - 1],
          items: [...store.subagents.values()].reduce((n, c) => n + c.items.length, 0), rows: document.querySelectorAll('.subagent-row').length,
          streams: document.querySelectorAll('.child-stream').length};
}
"""


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline"]


def main_thread_tasks(trace_path: Path) -> dict:
    """The page's main-thread tasks in a Chromium trace: wall-clock (``dur``) and the
    thread's own CPU time (``tdur``). On a shared 2-core machine a task is often
    descheduled mid-way, so its wall-clock length measures the machine; its CPU time is
    the work the page did."""
    data = json.loads(trace_path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tasks: dict[tuple, list] = {}
    for e in events:
        if e.get("name") == "RunTask" and e.get("ph") == "X" and names.get((e.get("pid"), e.get("tid"))) == "CrRendererMain":
            tasks.setdefault((e["pid"], e["tid"]), []).append(e)
    runs = max(tasks.values(), key=len) if tasks else []  # the page's renderer (the busiest)
    cpu = sorted(e.get("tdur", 0) / 1000 for e in runs)
    wall = sorted(e["dur"] / 1000 for e in runs)
    return {
        "tasks": len(runs),
        "cpuMax": cpu[-1] if cpu else 0.0,
        "cpuP99": cpu[int(len(cpu) * 0.99)] if cpu else 0.0,
        "cpuOver50": sum(1 for c in cpu if c > 50),
        "cpuSeconds": sum(cpu) / 1000,
        "wallOver50": sum(1 for w in wall if w > 50),
        "wallMax": wall[-1] if wall else 0.0,
    }


def report_trace(t: dict, seconds: float) -> None:
    print(f"main-thread tasks while streaming: {t['tasks']}; CPU time per task max {t['cpuMax']:.1f} ms, p99 {t['cpuP99']:.1f} ms, "
          f"{t['cpuOver50']} over 50 ms (target: none); the page's main thread busy {t['cpuSeconds']:.2f} s of CPU in {seconds:.1f} s")
    print(f"  the same tasks by wall clock (descheduled time included): {t['wallOver50']} over 50 ms, longest {t['wallMax']:.0f} ms")


REAL_SETUP = """
import json
from runtime.models import Agent, ModelConfig
rules = json.loads({rules!r})
model, _ = ModelConfig.objects.update_or_create(
    name="bench-subagents",
    defaults=dict(display_name="Bench subagents", provider_kind="scripted", provider_name="scripted", model_id="bench-subagents",
                  context_window=64000, max_output_tokens=4096, price_input=1, price_output=2, options={{"rules": rules}}),
)
Agent.objects.update_or_create(name="bench-sub", defaults=dict(
    model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="never", description="bench: subagents",
    subagent_policy={{"enabled": True, "agents": ["bench-sub"], "max_tasks_per_call": {children}, "max_concurrency": {children},
                      "max_concurrency_per_session": {children}, "child_budget": {{"idle_seconds": 120, "wall_clock_seconds": 600}}}},
))
"""

# In the page: the number of rows running at each quarter second (how many children
# really streamed at once), and the frames the socket delivered per type.
WATCH = """
() => {
  const store = window.neta.store; const receive = store.receive.bind(store);
  window.__bench = {frames: 0, slowest: 0, maxRunning: 0, t0: null};
  store.receive = (frame) => {
    const t = performance.now(); receive(frame); const ms = performance.now() - t;
    if (frame.type === 'subagent_event') { window.__bench.frames += 1; if (window.__bench.t0 === null) window.__bench.t0 = t; }
    if (ms > window.__bench.slowest) window.__bench.slowest = ms;
  };
  window.__bench.timer = setInterval(() => {
    for (const b of document.querySelectorAll('.live-slot .subagent-expand[aria-expanded=false]')) b.click();
    const running = document.querySelectorAll('.live-slot .subagent-row[data-status=running]').length;
    if (running > window.__bench.maxRunning) window.__bench.maxRunning = running;
  }, 250);
}
"""


def real_rules(children: int, seconds: float) -> dict:
    # A child streams ~80 characters a second (4 every 50 ms): `seconds` of text.
    text = "word " * int(seconds * 16)
    tasks = [{"agent": "bench-sub", "task": f"bench child {i}: write about part {i}"} for i in range(children)]
    return {
        "version": 1,
        "rules": [
            {"match": {"contains": "bench child"}, "reply": [{"thinking": "Part of a benchmark.", "chunk_size": 8, "delay_ms": 50},
                                                              {"text": text, "chunk_size": 4, "delay_ms": 50}]},
            {"match": {"contains": "bench delegate"}, "replies": [
                [{"text": "Delegating."}, {"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": tasks}}}],
                [{"text": "All children reported."}],
            ]},
        ],
        "default": {"reply": [{"text": "ok"}]},
    }


def measure_real(browser, server, base_url: str, *, children: int = 8, seconds: float = 15) -> dict:
    """A real delegate turn with ``children`` child processes, every row open; the page's
    long tasks from the first child event to the batch's end, then idle for as long."""
    server.python(REAL_SETUP.format(rules=json.dumps(real_rules(children, seconds)), children=children))
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, base_url, path="/?agent=bench-sub")
    page.add_init_script(LONGTASKS)
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    page.evaluate(WATCH)
    page.fill("#composer-input", "bench delegate please")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".live-slot .subagent-panel", timeout=120_000)
    page.wait_for_function("() => window.__bench.t0 !== null", timeout=120_000)
    trace = Path(tempfile.mkdtemp(prefix="neta-bench-trace-")) / "trace.json"
    browser.start_tracing(page=page, path=str(trace), categories=TRACE_CATEGORIES)
    page.wait_for_function("() => !document.querySelector('.live-slot .subagent-panel') && !window.neta.store.running", timeout=600_000, polling=500)
    browser.stop_tracing()
    result = page.evaluate("""() => { clearInterval(window.__bench.timer); const b = window.__bench; const t1 = performance.now();
      return {t0: b.t0, t1, frames: b.frames, slowest: b.slowest, maxRunning: b.maxRunning,
              tasks: window.__longtasks.filter((t) => t.start >= b.t0).map((t) => Math.round(t.duration)),
              statuses: [...document.querySelectorAll('.stable-list .subagent-panel .subagent-row')].map((r) => r.dataset.status)}; }""")
    seconds_streamed = (result["t1"] - result["t0"]) / 1000
    idle_t0 = page.evaluate("() => performance.now()")
    page.wait_for_timeout(seconds_streamed * 1000)
    result["idle"] = page.evaluate(f"() => window.__longtasks.filter((t) => t.start >= {idle_t0}).map((t) => Math.round(t.duration))")
    result["seconds"] = seconds_streamed
    result["trace"] = main_thread_tasks(trace)
    result["errors"] = errors
    context.close()
    return result


def report_real(result: dict, children: int) -> None:
    print(f"real delegate batch, {children} child processes, every row open: {result['frames']} subagent_event frames in "
          f"{result['seconds']:.1f} s, at most {result['maxRunning']} rows running at once; final statuses {result['statuses']}")
    print(f"slowest store.receive: {result['slowest']:.1f} ms")
    report_trace(result["trace"], result["seconds"])
    print(f"long tasks > 50 ms (PerformanceObserver, wall clock) while the children streamed: {len(result['tasks'])} {result['tasks']}")
    print(f"long tasks > 50 ms on the idle page for as long (the machine's own noise): {len(result['idle'])} {result['idle']}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if result["errors"]:
        print(f"page errors: {result['errors'][:5]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--rate", type=int, default=10, help="subagent_event frames per second per child")
    parser.add_argument("--collapsed", action="store_true", help="synthetic: leave the rows closed (the streams are not drawn)")
    parser.add_argument("--source", choices=("real", "synthetic"), default="real", help="real child processes (default) or synthetic frames")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    var_dir = Path(tempfile.mkdtemp(prefix="neta-bench-subagents-"))
    deployment = browser_deployment(var_dir)
    server = Site(deployment).start()
    base_url = server.base_url
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            if args.source == "real":
                result = measure_real(browser, server, base_url, children=args.children, seconds=args.seconds)
                browser.close()
                report_real(result, args.children)
                return 0
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(120_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
            page.add_init_script(LONGTASKS)
            login(page, base_url)
            page.fill("#composer-input", "hello")  # a leaf to hang the batch on
            page.press("#composer-input", "Enter")
            page.wait_for_function("() => window.neta.store.snapshot.entries.length >= 2 && window.neta.store.run.state === 'completed'")
            # Settled: the page has every tree event the server wrote (the synthetic entry comes after them).
            page.wait_for_function(
                """async () => { const s = window.neta.store;
                  const r = await fetch(`/api/sessions/${s.sessionId}/snapshot/`); return (await r.json()).revision === s.snapshot.revision; }""",
                polling=500,
            )
            page.wait_for_timeout(1000)
            trace = var_dir / "trace.json"
            browser.start_tracing(page=page, path=str(trace), categories=TRACE_CATEGORIES)
            result = page.evaluate(FEED, {"children": args.children, "seconds": args.seconds, "rate": args.rate, "expand": not args.collapsed})
            browser.stop_tracing()
            tasks = page.evaluate(f"() => window.__longtasks.filter((t) => t.start >= {result['t0']}).map((t) => Math.round(t.duration))")
            # The same page for the same time with nothing fed: what the machine itself costs now.
            idle_t0 = page.evaluate("() => performance.now()")
            page.wait_for_timeout(args.seconds * 1000)
            idle = page.evaluate(f"() => window.__longtasks.filter((t) => t.start >= {idle_t0}).map((t) => Math.round(t.duration))")
            browser.close()
    finally:
        deployment.close()
    print(f"{args.children} children × {args.rate} frames/s for {args.seconds:.0f} s: {result['frames']} subagent frames, "
          f"{result['rows']} rows, {result['streams']} streams drawn, {result['items']} stream items")
    print(f"store.receive per frame: p50 {result['p50']:.2f} ms, p99 {result['p99']:.2f} ms, max {result['max']:.1f} ms")
    report_trace(main_thread_tasks(trace), args.seconds)
    print(f"long tasks > 50 ms (PerformanceObserver, wall clock) while streaming: {len(tasks)} {tasks}")
    print(f"long tasks > 50 ms on the idle page for as long (the machine's own noise): {len(idle)} {idle}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if errors:
        print(f"page errors: {errors[:5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
