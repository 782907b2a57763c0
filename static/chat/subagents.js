// Subagent children in the page (docs/subagents.md): one reducer for a child's stream,
// fed either by live `subagent_event` frames (deltas merged, `firstSeq..seq`) or by the
// replay endpoint's rows (`GET /api/subagent-runs/{id}/events/`, one event a row) — the
// same view either way (tests/js/panels.test.mjs). The batch panel's rows come from the
// tree's `subagent_batch` / `subagent_result` entries (the truth: docs/realtime.md), with what the
// live events add while the children run. Pure: no DOM, no fetch.

import { stateToken } from "./state_tokens.js";
import { t } from "./i18n.js";

const TERMINAL = new Set(["completed", "partial", "failed", "cancelled", "timed_out", "lost"]);
const MAX_ITEMS = 400;

export function emptyChild(runId, fields = {}) {
  return {
    runId,
    lastSeq: 0,
    gap: false, // an event came after a hole: the replay endpoint fills it
    items: [], // {kind: "text"|"thinking", key, text} | {kind: "tool", key, call, result}
    status: null,
    usage: null,
    counts: null,
    phase: null,
    lastActivity: null,
    startedTs: null,
    lastTs: null,
    endedTs: null,
    errorCode: null,
    error: null,
    finalText: null,
    pid: null,
    waitingApproval: null, // the tool call id of a request that waits for a person (approval_request)
    ...fields,
  };
}

function withItem(items, key, make, update) {
  const index = items.findIndex((i) => i.key === key);
  const next = items.slice();
  if (index < 0) {
    next.push(update(make()));
    if (next.length > MAX_ITEMS) next.splice(0, next.length - MAX_ITEMS);
  } else next[index] = update(next[index]);
  return next;
}

function toolItem(id, name = "", args = {}) {
  return { kind: "tool", key: `tool:${id}`, call: { type: "toolCall", id, name, arguments: args }, result: null };
}

function activity(ce) {
  switch (ce.type) {
    case "run_start":
      return t("started");
    case "assistant_delta":
      return ce.kind === "thinking" ? t("thinking…") : t("writing…");
    case "assistant_message":
      return t("answered");
    case "tool_call":
      return t("tool {name}", { name: ce.name ?? "" }).trim();
    case "tool_result":
      return ce.isError ? t("{name} failed", { name: ce.name ?? "tool" }) : t("{name} done", { name: ce.name ?? "tool" });
    case "proxy_request":
      return t("tool {name} (main process)", { name: ce.name ?? "" });
    case "approval_request":
      return t("waiting for approval of {name}", { name: ce.name ?? "" });
    case "heartbeat":
      return null;
    case "run_end":
      return ce.status === "partial" ? t("stopped: {reason}", { reason: ce.stopReason ?? "budget" }) : t("finished");
    case "run_error":
      return `${ce.code ?? "error"}: ${ce.message ?? ""}`.trim();
    default:
      return null;
  }
}

/**
 * One child event applied to `child` (returns a new child; the same one for a duplicate).
 * `firstSeq` is the first seq the event covers (live merged deltas), else its `seq`.
 */
export function applyChildEvent(child, ce, firstSeq = ce?.seq) {
  if (!ce || typeof ce.seq !== "number") return child;
  if (ce.seq <= child.lastSeq) return child; // seen (a replay overlapping the live events)
  if (firstSeq > child.lastSeq + 1) return child.gap ? child : { ...child, gap: true };
  let next = { ...child, lastSeq: ce.seq, gap: false };
  const ts = typeof ce.ts === "number" ? ce.ts : null;
  if (next.startedTs === null && ts !== null) next.startedTs = ts;
  if (ts !== null) next.lastTs = ts;
  const act = activity(ce);
  if (act) next.lastActivity = act;
  switch (ce.type) {
    case "run_start":
      next.pid = ce.pid ?? next.pid;
      if (!TERMINAL.has(next.status)) next.status = "running";
      break;
    case "heartbeat":
      next.phase = ce.phase ?? next.phase;
      if (ce.usage) next.usage = ce.usage;
      if (ce.counts) next.counts = ce.counts;
      break;
    case "assistant_delta": {
      const kind = ce.kind === "thinking" ? "thinking" : "text";
      const key = `${ce.turn}:${ce.contentIndex}:${kind}`;
      next.items = withItem(next.items, key, () => ({ kind, key, text: "" }), (i) => ({ ...i, text: i.text + (ce.delta ?? "") }));
      break;
    }
    case "assistant_message": {
      const blocks = Array.isArray(ce.message?.content) ? ce.message.content : [];
      let items = next.items;
      blocks.forEach((block, index) => {
        if (block?.type === "text" || block?.type === "thinking") {
          const kind = block.type;
          const key = `${ce.turn}:${index}:${kind}`;
          const text = (kind === "text" ? block.text : block.thinking) ?? "";
          items = withItem(items, key, () => ({ kind, key, text: "" }), (i) => ({ ...i, text }));
        } else if (block?.type === "toolCall" && block.id) {
          items = withItem(items, `tool:${block.id}`, () => toolItem(block.id, block.name, block.arguments ?? {}), (i) => i);
        }
      });
      next.items = items;
      if (ce.message?.usage) next.usage = ce.message.usage;
      break;
    }
    case "tool_call":
      next.items = withItem(next.items, `tool:${ce.toolCallId}`, () => toolItem(ce.toolCallId), (i) => ({
        ...i,
        call: { ...i.call, name: ce.name ?? i.call.name, arguments: ce.arguments ?? i.call.arguments },
      }));
      break;
    case "approval_request":
      next.waitingApproval = ce.toolCallId ?? null;
      break;
    case "tool_result":
      if (next.waitingApproval === ce.toolCallId) next.waitingApproval = null;
      next.items = withItem(next.items, `tool:${ce.toolCallId}`, () => toolItem(ce.toolCallId, ce.name), (i) => ({
        ...i,
        result: {
          message: {
            role: "toolResult",
            toolCallId: ce.toolCallId,
            toolName: ce.name,
            content: [{ type: "text", text: ce.preview ?? "" }],
            isError: Boolean(ce.isError),
            details: ce.details ?? undefined,
          },
        },
      }));
      break;
    case "run_end":
      next.waitingApproval = null;
      next.status = ce.status === "partial" ? "partial" : "completed";
      next.finalText = ce.finalText ?? null;
      if (ce.usage) next.usage = ce.usage;
      if (ce.counts) next.counts = ce.counts;
      if (ce.status === "partial") next.errorCode = ce.stopReason ?? null;
      next.endedTs = ts;
      break;
    case "run_error":
      next.waitingApproval = null;
      next.errorCode = ce.code ?? null;
      next.error = ce.message ?? null;
      if (ce.usage) next.usage = ce.usage;
      next.endedTs = ts;
      break;
    default:
      break;
  }
  return next;
}

/** The replay endpoint's rows ({seq, type, payload}) as child events. */
export function replayEvents(rows) {
  return (Array.isArray(rows) ? rows : []).map((row) => ({ ...(row.payload ?? {}), seq: row.seq, type: row.type }));
}

/**
 * What the children's approval requests look like in the stream: a key that changes when a
 * child starts or stops waiting for a person (the page then reads `approvals/`, the truth).
 */
export function approvalsKey(children) {
  const waiting = [];
  for (const [runId, child] of children) {
    // The phase is part of it: once decided, the child's next heartbeat says it is past the wait.
    if (child.waitingApproval && !TERMINAL.has(child.status)) waiting.push(`${runId}/${child.waitingApproval}/${child.phase === "approval" ? "waiting" : child.phase}`);
  }
  return waiting.sort().join(" ");
}

/** A child's stream without what only differs by delivery (for comparing live and replay). */
export function childView(child) {
  return { items: child.items, status: child.status, usage: child.usage, errorCode: child.errorCode, error: child.error, finalText: child.finalText };
}

export function usageTokens(usage) {
  if (!usage || typeof usage !== "object") return null;
  const total = Number(usage.totalTokens);
  if (Number.isFinite(total) && total > 0) return total;
  const sum = ["input", "output", "cacheRead", "cacheWrite"].reduce((n, k) => n + (Number(usage[k]) || 0), 0);
  return sum || null;
}

export function usageCost(usage) {
  const cost = Number(usage?.cost?.total ?? usage?.cost);
  return Number.isFinite(cost) ? cost : null;
}

function parseTime(value) {
  if (typeof value === "number") return value;
  const t = typeof value === "string" ? Date.parse(value) : NaN;
  return Number.isFinite(t) ? t : null;
}

const BUDGETS = {
  get budget_turns() { return t("the turn budget"); },
  get budget_tool_calls() { return t("the tool-call budget"); },
  get budget_tokens() { return t("the token budget"); },
  get budget_cost() { return t("the cost budget"); },
  get budget_wall_clock() { return t("the wall-clock budget"); },
};

/** The budget that stopped a partial child, from its result entry's last process events. */
function stopReasonOf(resultEntry) {
  const events = resultEntry?.metadata?.processEvents;
  if (!Array.isArray(events)) return null;
  for (let i = events.length - 1; i >= 0; i -= 1) if (events[i]?.type === "run_end") return typeof events[i].stopReason === "string" ? events[i].stopReason : null;
  return null;
}

const WHY = {
  get partial() { return t("stopped by a budget"); },
  get failed() { return t("failed"); },
  get lost() { return t("its supervisor was lost"); },
  get cancelled() { return t("cancelled"); },
  get timed_out() { return t("timed out"); },
};

/**
 * The rows of a `subagent_batch` entry: each child's agent, task, status (+ state token),
 * start/end times, usage, why it did not complete, and its live stream (if any).
 * `results` are the batch's `subagent_result` entries (by runId); `children` the store's
 * live/replayed children (by runId). A finished batch's entries are the truth for the
 * status; while it runs, a child's own terminal event may be ahead of the checkpoint.
 */
export function batchRows(entry, { results = {}, children = new Map(), inFlight = false } = {}) {
  const runs = Array.isArray(entry?.runs) ? entry.runs : [];
  const records = new Map((Array.isArray(entry?.metadata?.runs) ? entry.metadata.runs : []).map((r) => [r.runId, r]));
  return runs.map((run) => {
    const record = records.get(run.runId) ?? {};
    const result = results[run.runId]?.content?.results?.[0] ?? null;
    const child = children.get(run.runId) ?? null;
    let status = result?.status ?? run.status ?? "queued";
    if (inFlight && child?.status && (TERMINAL.has(child.status) || !TERMINAL.has(status))) status = child.status;
    const errorCode = result?.errorCode ?? record.errorCode ?? (status === "partial" ? stopReasonOf(results[run.runId]) : null) ?? child?.errorCode ?? null;
    const error = result?.error ?? child?.error ?? null;
    const cancelledBy = record.cancelledBy ?? null;
    let why = null;
    if (status in WHY) {
      const what = status === "partial" && BUDGETS[errorCode] ? t("stopped by {budget}", { budget: BUDGETS[errorCode] }) : WHY[status];
      why = `${what}${errorCode && errorCode !== status ? ` (${errorCode})` : ""}${error ? `: ${error}` : ""}${cancelledBy ? ` — ${t("by {who}", { who: cancelledBy })}` : ""}`;
    }
    return {
      runId: run.runId,
      taskIndex: run.taskIndex,
      agent: run.agent ?? "?",
      task: run.task ?? "",
      status,
      token: stateToken(status),
      startedAt: parseTime(record.startedAt) ?? child?.startedTs ?? null,
      endedAt: parseTime(record.endedAt) ?? child?.endedTs ?? null,
      usage: result?.usage ?? record.usage ?? child?.usage ?? null,
      lastActivity: child?.lastActivity ?? (TERMINAL.has(status) ? (status === "completed" ? t("finished") : why) : null),
      why,
      finalText: result?.finalText ?? child?.finalText ?? null,
      resultEntryId: results[run.runId]?.id ?? null,
      child,
    };
  });
}

/** Rows for a batch known only from live events (its entry has not arrived yet). */
export function heldBatchRows(children) {
  return [...children.values()]
    .sort((a, b) => (a.taskIndex ?? 0) - (b.taskIndex ?? 0))
    .map((child) => ({
      runId: child.runId,
      taskIndex: child.taskIndex,
      agent: child.agent ?? "?",
      task: "",
      status: child.status ?? "running",
      token: stateToken(child.status ?? "running"),
      startedAt: child.startedTs,
      endedAt: child.endedTs,
      usage: child.usage,
      lastActivity: child.lastActivity,
      why: null,
      finalText: child.finalText,
      child,
    }));
}

export function isTerminalChild(status) {
  return TERMINAL.has(status);
}

const MAX_CHILDREN = 200;

/**
 * A `subagent_*` streaming event applied to `children` (Map runId → child; returns a new
 * Map when something changed, else the same one).
 */
export function applySubagentStream(children, event) {
  const runId = event?.subagentRunId;
  if (typeof runId !== "string") return children;
  const known = children.get(runId);
  const child = known ?? emptyChild(runId, { agent: event.agent ?? null, taskIndex: event.taskIndex ?? null, batchId: event.batchId ?? null, parentRunId: event.runId ?? null });
  let next = child;
  if (event.type === "subagent_run_started") {
    next = { ...child, agent: event.agent ?? child.agent, taskIndex: event.taskIndex, batchId: event.batchId, batchEntryId: event.batchEntryId ?? child.batchEntryId ?? null, pid: event.pid ?? child.pid };
    if (!TERMINAL.has(next.status)) next.status = "running";
  } else if (event.type === "subagent_event") {
    next = applyChildEvent(child, event.event ? { ...event.event, seq: event.seq } : null, event.firstSeq);
  } else if (event.type === "subagent_run_completed") {
    next = { ...child, status: event.status, errorCode: event.errorCode ?? (event.status === "partial" ? child.errorCode : null), error: event.error ?? null, usage: event.usage ?? child.usage, eventCount: event.eventCount, agent: event.agent ?? child.agent };
  }
  if (next === known) return children;
  const map = new Map(children);
  map.set(runId, next);
  if (map.size > MAX_CHILDREN) map.delete(map.keys().next().value);
  return map;
}

/** Replayed rows for one child applied to `children` (a new Map when they added something). */
export function applySubagentReplay(children, runId, rows, fields = {}) {
  const known = children.get(runId);
  let child = known ?? emptyChild(runId, fields);
  for (const event of replayEvents(rows)) child = applyChildEvent(child, event);
  if (child === known) return children;
  const map = new Map(children);
  map.set(runId, child);
  return map;
}

/**
 * Batches seen only through live events, whose tree entry is not here yet: batchId →
 * children. `hasBatch(batchId, batchEntryId)` says whether the tree holds that batch.
 */
export function heldBatches(children, hasBatch) {
  const held = new Map();
  for (const child of children.values()) {
    if (!child.batchId || hasBatch(child.batchId, child.batchEntryId ?? null)) continue;
    if (!held.has(child.batchId)) held.set(child.batchId, new Map());
    held.get(child.batchId).set(child.runId, child);
  }
  return held;
}

/**
 * One word for how a batch ended, from its children's statuses and the batch's own state:
 * `cancelled` when the whole batch was stopped (its parent aborted) or every child was
 * cancelled; the worst real failure (`failed`, `lost`, `timed_out`) when a child failed;
 * `partial` when some completed and others were cancelled by hand or stopped by a budget;
 * `completed` when all did. A child cancelled by hand is not a failure of the batch.
 */
export function batchOutcome(statuses, state = null) {
  if (state === "cancelled") return "cancelled";
  const list = statuses.filter((s) => typeof s === "string");
  for (const worst of ["failed", "lost", "timed_out"]) if (list.includes(worst)) return worst;
  if (list.length && list.every((s) => s === "cancelled")) return "cancelled";
  if (list.some((s) => s === "cancelled" || s === "partial") || state === "budget_stopped") return "partial";
  return "completed";
}
