// A `subagent_batch` node as one panel: a row per child (agent, task, status, elapsed,
// tokens/cost, last activity, why it did not complete), each expandable into the
// child's own stream — its text, thinking and tool cards drawn by the same renderers as
// the parent's. Live from `subagent_*` events; after a reload (or for a finished batch)
// from the tree entries plus the replay endpoint, through the same reducer
// (subagents.js), so the view is the same either way. Per-child and batch cancel.

import { Component } from "preact";
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { registerToolRenderer, ToolCard } from "./tool_renderers.js";
import { api } from "../api.js";
import { renderMarkdown } from "../markdown.js";
import { formatCost, formatTokens } from "../conversation_model.js";
import { batchOutcome, batchRows, heldBatchRows, isTerminalChild, usageCost, usageTokens } from "../subagents.js";
import { STATE_LABELS, stateToken } from "../state_tokens.js";
import { StateBadge } from "./state_parts.js";
import { Thinking } from "./thinking.js";
import { t, tn } from "../i18n.js";

const REPLAY_PAGE = 500;
const replaying = new Set(); // runIds with a replay request in flight (one at a time per child)

async function replay(store, runId, fields) {
  if (replaying.has(runId)) return;
  replaying.add(runId);
  try {
    for (let round = 0; round < 50; round += 1) {
      const after = store.subagents.get(runId)?.lastSeq ?? 0;
      const page = await api(`subagent-runs/${encodeURIComponent(runId)}/events/?afterSeq=${after}&limit=${REPLAY_PAGE}`);
      store.subagentReplayed(runId, page.events, fields);
      if (!page.hasMore || page.events.length === 0) break;
    }
  } catch (e) {
    console.warn(`neta: could not replay subagent run ${runId}`, e);
  } finally {
    replaying.delete(runId);
  }
}

function elapsed(row, now) {
  if (!row.startedAt) return null;
  const end = row.endedAt ?? (isTerminalChild(row.status) ? row.child?.lastTs ?? row.startedAt : now);
  const seconds = Math.max(0, Math.round((end - row.startedAt) / 1000));
  return seconds >= 60 ? `${Math.floor(seconds / 60)}m ${seconds % 60}s` : `${seconds}s`;
}

function useTicker(active) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [active]);
  return now;
}

export { StateBadge };

/** One item of a child's stream; redrawn only when it changed (the reducer keeps the others). */
const idle = typeof requestIdleCallback === "function" ? (fn) => requestIdleCallback(fn, { timeout: 500 }) : (fn) => setTimeout(fn, 0);
const unidle = typeof cancelIdleCallback === "function" ? cancelIdleCallback : clearTimeout;

/** The result a child's tool call shows when the child ended before the call had one. */
const NOT_RUN = { message: { role: "toolResult", content: [{ type: "text", get text() { return t("Not run: the subagent ended before this call finished."); } }], isError: true } };

class StreamItem extends Component {
  shouldComponentUpdate(next, nextState) {
    return next.item !== this.props.item || next.live !== this.props.live || next.ended !== this.props.ended || nextState.html !== this.state.html;
  }

  componentDidMount() {
    this.schedule();
  }

  componentDidUpdate() {
    this.schedule();
  }

  componentWillUnmount() {
    if (this.pending) unidle(this.pending);
  }

  /** A finished text becomes markdown in an idle moment, one item per task (eight children
   * finishing a turn together would otherwise parse eight texts in one long task). */
  schedule() {
    const { item, live } = this.props;
    if (live || item.kind !== "text" || this.state.source === item.text || this.pending) return;
    this.pending = idle(() => {
      this.pending = null;
      const text = this.props.item.text;
      this.setState({ html: renderMarkdown(text), source: text });
    });
  }

  render({ item, live, ended }, { html: rendered, source }) {
    if (item.kind === "tool") return html`<${ToolCard} call=${item.call} result=${item.result ?? (ended ? NOT_RUN : null)} store=${null} streaming=${false} />`;
    if (item.kind === "thinking") return html`<${Thinking} text=${item.text} streaming=${live} />`;
    // The text a child is still writing is plain (eight streams of markdown re-parsed at
    // every delta would hold the main thread); it becomes markdown once the next item
    // starts or the child ends (bench/chat_subagents.py).
    if (live || source !== item.text) return html`<div class="child-live-text">${item.text.length > 1500 ? `…${item.text.slice(-1500)}` : item.text}</div>`;
    return html`<div class="markdown" dangerouslySetInnerHTML=${{ __html: rendered }}></div>`;
  }
}

const STREAM_REDRAW_MS = 250;

/** Like useStore, at most once per `ms`: eight live streams redraw 4 times a second, not at every frame. */
function useThrottledStore(store, part, ms) {
  const [, force] = useReducer((n) => n + 1, 0);
  useEffect(() => {
    let timer = null;
    const off = store.subscribe((changes) => {
      if (!changes.has(part) || timer !== null) return;
      timer = setTimeout(() => {
        timer = null;
        force();
      }, ms);
    });
    return () => {
      off();
      clearTimeout(timer);
    };
  }, [store]);
}

/** The stream box redraws on its own clock (above), not with every redraw of its row. */
class ChildStreamBox extends Component {
  shouldComponentUpdate(next) {
    const a = this.props.row;
    const b = next.row;
    return a.runId !== b.runId || a.status !== b.status || a.finalText !== b.finalText;
  }

  render({ store, row }) {
    return html`<${ChildStream} store=${store} row=${row} />`;
  }
}

function ChildStream({ store, row }) {
  useThrottledStore(store, "subagents", STREAM_REDRAW_MS);
  const child = store.subagents.get(row.runId) ?? null;
  // The box follows its bottom while the child writes, unless the reader scrolled up in it.
  const box = useRef(null);
  const stick = useRef(true);
  useLayoutEffect(() => {
    if (stick.current && box.current) box.current.scrollTop = box.current.scrollHeight;
  });
  const onScroll = () => {
    const el = box.current;
    if (el) stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
  };
  useEffect(() => {
    // After a reload (nothing live for this child), a hole in the live events, or a
    // finished child whose stream was not watched: the replay endpoint fills it in.
    if (!child || child.gap || (isTerminalChild(row.status) && child.lastSeq === 0)) replay(store, row.runId, { agent: row.agent, taskIndex: row.taskIndex });
  }, [row.runId, child?.gap, child === null]);
  const items = child?.items ?? [];
  return html`
    <div class="child-stream" data-subagent-stream=${row.runId} ref=${box} onScroll=${onScroll}>
      ${items.length === 0 ? html`<p class="muted">${isTerminalChild(row.status) ? t("Loading its events…") : t("Starting…")}</p>` : null}
      ${items.map((item, i) => html`<${StreamItem} key=${item.key} item=${item} live=${i === items.length - 1 && !isTerminalChild(row.status)} ended=${isTerminalChild(row.status)} />`)}
      ${row.finalText && !items.some((i) => i.kind === "text") ? html`<div class="markdown" dangerouslySetInnerHTML=${{ __html: renderMarkdown(row.finalText) }}></div>` : null}
    </div>
  `;
}

function ChildRow({ store, row, now, live, onError }) {
  const [open, setOpen] = useState(false);
  // A batch in flight whose child this page has not watched (a reload, another tab): its
  // events so far come from the replay endpoint, so the row shows what it showed before
  // (elapsed, tokens, last activity, why it ended) and its stream is ready to open.
  useEffect(() => {
    if (live && !row.child) replay(store, row.runId, { agent: row.agent, taskIndex: row.taskIndex });
  }, [row.runId, live]);
  const tokens = usageTokens(row.usage);
  const cost = usageCost(row.usage);
  const cancel = async () => {
    try {
      await api(`subagent-runs/${encodeURIComponent(row.runId)}/cancel/`, { method: "POST" });
    } catch (e) {
      onError(t("Could not cancel: {error}", { error: e.message }));
    }
  };
  return html`
    <li class=${`subagent-row state-${row.token}`} data-run-id=${row.runId} data-status=${row.status} data-result-entry-id=${row.resultEntryId ?? undefined}>
      <div class="subagent-row-line">
        <button type="button" class="panel-toggle subagent-expand" aria-expanded=${open} onClick=${() => setOpen(!open)} title=${t("Show this subagent's stream")}>
          <span class="chevron" aria-hidden="true">${open ? "▾" : "▸"}</span>
          <span class="subagent-agent">${row.agent}</span>
          <span class="subagent-task" title=${row.task}>${row.task || t("task {n}", { n: row.taskIndex + 1 })}</span>
        </button>
        <${StateBadge} status=${row.status} label=${row.status === "lost" ? "lost" : null} />
        <span class="subagent-elapsed muted" title=${t("elapsed")}>${elapsed(row, now) ?? ""}</span>
        <span class="subagent-usage muted" title=${t("tokens · cost")}>${tokens !== null ? t("{tokens} tok", { tokens: formatTokens(tokens) }) : ""}${cost !== null ? ` · ${formatCost(cost)}` : ""}</span>
        ${live && !isTerminalChild(row.status) ? html`<button type="button" class="icon-button danger-text" onClick=${cancel} aria-label=${t("Cancel subagent {n}", { n: row.taskIndex + 1 })}>${t("Cancel")}</button>` : null}
      </div>
      ${row.why ? html`<div class="subagent-why">${row.why}</div>` : row.lastActivity ? html`<div class="subagent-activity muted">${row.lastActivity}</div>` : null}
      ${open ? html`<${ChildStreamBox} store=${store} row=${row} />` : null}
    </li>
  `;
}

function BatchFrame({ store, rows, title, state, live, batchEntryId }) {
  const [error, setError] = useState(null);
  const running = rows.some((r) => !isTerminalChild(r.status));
  const now = useTicker(live && running);
  const counts = {};
  for (const row of rows) counts[row.token] = (counts[row.token] ?? 0) + 1;
  const token = live && running ? "running" : stateToken(batchOutcome(rows.map((r) => r.status), state));
  // Every child not ended, at once (a queued one never starts; a running one is told to stop).
  const cancelAll = async () => {
    const open = rows.filter((r) => !isTerminalChild(r.status));
    const outcomes = await Promise.allSettled(open.map((row) => api(`subagent-runs/${encodeURIComponent(row.runId)}/cancel/`, { method: "POST" })));
    const failed = outcomes.filter((o) => o.status === "rejected");
    if (failed.length) setError(t("Could not cancel {failed} of {all}: {error}", { failed: failed.length, all: open.length, error: failed[0].reason?.message ?? failed[0].reason }));
  };
  return html`
    <section class=${`panel subagent-panel state-${token}`} aria-label=${t("Subagents")} data-entry-id=${batchEntryId ?? undefined} data-state=${token}>
      <header class="panel-head">
        <span class="panel-title">⇶ ${title}</span>
        <span class="muted">${tn("{n} child", "{n} children", rows.length)}${Object.entries(counts).map(([k, n]) => ` · ${n} ${STATE_LABELS[k]}`).join("")}</span>
        <span class="spacer"></span>
        ${live && running ? html`<button type="button" class="icon-button danger-text" onClick=${cancelAll}>${t("Cancel all")}</button>` : null}
      </header>
      <ul class="subagent-rows">
        ${rows.map((row) => html`<${ChildRow} key=${row.runId} store=${store} row=${row} now=${now} live=${live} onError=${setError} />`)}
      </ul>
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
    </section>
  `;
}

/** A batch entry (finished, in the conversation; or in flight, below it). */
export function SubagentPanel({ store, entry, results = {}, inFlight = false }) {
  useThrottledStore(store, "subagents", STREAM_REDRAW_MS); // the entry itself comes as a prop
  const rows = batchRows(entry, { results, children: store.subagents, inFlight });
  const mode = entry.mode === "chain" ? "chain" : entry.mode === "single" ? "task" : "parallel";
  return html`<${BatchFrame} store=${store} rows=${rows} title=${mode === "parallel" ? t("Subagents (parallel)") : mode === "chain" ? t("Subagents (chain)") : t("Subagent (task)")} state=${entry.metadata?.state} live=${inFlight} batchEntryId=${entry.id} />`;
}

/** Children seen on the socket before their batch entry arrived (replaced by it when it does). */
export function HeldBatches({ store }) {
  useStore(store, ["tree"]);
  useThrottledStore(store, "subagents", STREAM_REDRAW_MS);
  const held = store.heldBatches();
  if (held.size === 0) return null;
  return [...held.entries()].map(([batchId, children]) => html`<${BatchFrame} key=${batchId} store=${store} rows=${heldBatchRows(children)} title=${t("Subagents (starting)")} live=${true} />`);
}

/** The conversation item of a finished `subagent_batch` entry (its results joined to it). */
export function SubagentBatchNode({ entry, results, store }) {
  return html`<div class="msg msg-node msg-subagents" data-entry-id=${entry.id}><${SubagentPanel} store=${store} entry=${entry} results=${results ?? {}} /></div>`;
}

/** A tree row's status for batch and result nodes. */
export function SubagentRowStatus({ entry, inFlight }) {
  if (entry?.type === "subagent_result") return html`<${StateBadge} status=${entry.status} />`;
  if (entry?.type !== "subagent_batch") return null;
  return html`<${StateBadge} status=${inFlight ? "running" : batchStatus(entry)} />`;
}

/** One word for a finished batch (batchOutcome). */
export function batchStatus(entry) {
  return batchOutcome((Array.isArray(entry.runs) ? entry.runs : []).map((r) => r?.status), entry.metadata?.state);
}

registerToolRenderer("delegate_task", delegateRenderer((args) => [args]));
registerToolRenderer("delegate_parallel", delegateRenderer((args) => args?.tasks));
registerToolRenderer("delegate_chain", delegateRenderer((args) => args?.steps));

function delegateRenderer(tasksOf) {
  return {
    // The card says how the batch ended, not whether the model was told of a failure: a child
    // cancelled by hand beside two that completed is "partial", not an error.
    status: (result) => {
      const results = result?.message?.details?.results;
      if (!Array.isArray(results) || !results.length) return null;
      const outcome = batchOutcome(results.map((r) => r?.status), null);
      return outcome === "completed" ? "done" : outcome === "partial" ? "partial" : outcome === "cancelled" ? "cancelled" : "error";
    },
    summary: (args) => {
      const tasks = Array.isArray(tasksOf(args)) ? tasksOf(args) : [];
      return `${tn("{n} task", "{n} tasks", tasks.length)}: ${tasks.map((task) => task?.agent ?? "?").join(", ")}`;
    },
    Body: ({ args, result }) => {
      const tasks = Array.isArray(tasksOf(args)) ? tasksOf(args) : [];
      const text = result?.message?.content?.find?.((b) => b?.type === "text")?.text ?? "";
      return html`
        <ol class="delegate-tasks">${tasks.map((task, i) => html`<li key=${i}><code>${String(task?.agent ?? "?")}</code> ${String(task?.task ?? "")}</li>`)}</ol>
        ${result ? html`<details class="delegate-result"><summary class="tool-section-label">${t("Result (what the model read)")}</summary><pre class="tool-output"><code>${text}</code></pre></details>` : null}
      `;
    },
  };
}
