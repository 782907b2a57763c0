// The runtime panels' pure parts: the plan and the open question at the leaf,
// rebuilt from the active path (after a branch switch and a reload); subagent children
// from live events and from the replay endpoint (the same view), events held before their
// batch entry and replaced by it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SessionStore } from "../../static/chat/store.js";
import { openQuestion, planAt } from "../../static/chat/plan.js";
import { applyChildEvent, applySubagentStream, batchRows, childView, emptyChild } from "../../static/chat/subagents.js";
import { stateToken, STATE_TOKENS } from "../../static/chat/state_tokens.js";

const SID = "s-panels";
let ts = 0;
const msg = (id, parentId, message) => ({ type: "message", id, parentId, timestamp: `2026-12-01T00:00:${String(ts++).padStart(2, "0")}Z`, message });
const user = (id, parentId, text) => msg(id, parentId, { role: "user", content: [{ type: "text", text }], timestamp: 1 });
const callMsg = (id, parentId, calls) =>
  msg(id, parentId, { role: "assistant", content: calls.map(([cid, name, args]) => ({ type: "toolCall", id: cid, name, arguments: args })), stopReason: "toolUse", usage: { input: 1, output: 1 }, timestamp: 1 });
const todoResult = (id, parentId, callId, todos, isError = false) =>
  msg(id, parentId, { role: "toolResult", toolCallId: callId, toolName: "todo", content: [{ type: "text", text: "Plan updated" }], details: isError ? undefined : { todos }, isError, timestamp: 1 });

function snapshot(entries, leafId, revision = 1) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const children = {};
  for (const e of entries) (children[e.parentId ?? "root"] ??= []).push(e.id);
  const activePath = [];
  for (let c = leafId; c; c = byId.get(c).parentId) activePath.unshift(c);
  return {
    session: { sessionId: SID, provider: "file", title: "", cwd: "/w", agent: "a", status: "active", leafEntryId: leafId, parentSessionId: null },
    revision, leafId, entries, activePath, childrenByParentId: children, labelsByEntryId: {}, inFlight: null, runtimeContext: null,
    page: { truncated: false },
  };
}

const T1 = [{ content: "look", status: "in_progress" }, { content: "answer", status: "pending" }];
const T2 = [{ content: "look", status: "completed" }, { content: "answer", status: "in_progress" }];
const TB = [{ content: "other branch", status: "completed" }];
//   u1 ─ a1(todo c1) ─ r1(T1) ─ a2(todo c2) ─ r2(T2) ─ a3(todo c3) ─ r3(error)   (branch A)
//      └ a4(todo c4) ─ r4(TB) ─ a5(ask_user q1)                                 (branch B)
const entries = [
  user("u1", null, "plan it"),
  callMsg("a1", "u1", [["c1", "todo", { todos: T1 }]]),
  todoResult("r1", "a1", "c1", T1),
  callMsg("a2", "r1", [["c2", "todo", { todos: T2 }]]),
  todoResult("r2", "a2", "c2", T2),
  callMsg("a3", "r2", [["c3", "todo", { todos: "bad" }]]),
  todoResult("r3", "a3", "c3", null, true),
  callMsg("a4", "u1", [["c4", "todo", { todos: TB }]]),
  todoResult("r4", "a4", "c4", TB),
  callMsg("a5", "r4", [["q1", "ask_user", { question: "Which?", options: ["x", "y"] }]]),
];

test("the plan is the last successful todo result on the active path, rebuilt after a switch and a reload", () => {
  const store = new SessionStore({ sessionId: SID });
  store.setSnapshot(snapshot(entries, "r3", 11));
  const at = () => planAt(store.snapshot, (id) => store.entry(id));
  assert.deepEqual(at(), { todos: T2, done: 1, total: 2, current: T2[1], entryId: "r2" }); // the failed call is skipped
  store.receive({ type: "session_leaf_changed", sessionId: SID, revision: 12, leafId: "a5", previousLeafId: "r3", context: null });
  assert.deepEqual(at(), { todos: TB, done: 1, total: 1, current: null, entryId: "r4" });
  store.receive({ type: "session_leaf_changed", sessionId: SID, revision: 13, leafId: "r1", previousLeafId: "a5", context: null });
  assert.equal(at().current.content, "look");
  // A reload: a fresh store from the server's snapshot gives the same plan.
  const reloaded = new SessionStore({ sessionId: SID });
  reloaded.setSnapshot(structuredClone(store.snapshot));
  assert.deepEqual(planAt(reloaded.snapshot, (id) => reloaded.entry(id)), at());
  // A path without a todo result has no plan.
  assert.equal(planAt(snapshot(entries.slice(0, 1), "u1"), (id) => entries.find((e) => e.id === id)), null);
});

test("the open question is an ask_user call without a result on the last assistant message", () => {
  const lookup = (id) => entries.find((e) => e.id === id) ?? answered.find((e) => e.id === id);
  const answered = [msg("r5", "a5", { role: "toolResult", toolCallId: "q1", toolName: "ask_user", content: [{ type: "text", text: "The user answered: x" }], isError: false })];
  const open = openQuestion(snapshot(entries, "a5"), lookup);
  assert.deepEqual(open, { toolCallId: "q1", question: "Which?", options: ["x", "y"], allowFreeText: false, multiSelect: false, entryId: "a5" });
  assert.equal(openQuestion(snapshot([...entries, ...answered], "r5"), lookup), null);
  assert.equal(openQuestion(snapshot(entries, "r4"), lookup), null);
});

// ------------------------------------------------------------------ subagents

const RUN_A = "11111111-aaaa";
const RUN_B = "22222222-bbbb";
const childEvents = (runId) => [
  { type: "run_start", seq: 1, ts: 1000, agent: "default", pid: 42 },
  { type: "assistant_delta", seq: 2, ts: 1010, turn: 1, contentIndex: 0, kind: "text", delta: "Let me " },
  { type: "assistant_delta", seq: 3, ts: 1020, turn: 1, contentIndex: 0, kind: "text", delta: "look." },
  { type: "tool_call", seq: 4, ts: 1030, turn: 1, toolCallId: `${runId}-t1`, name: "ls", arguments: { path: "." }, route: "worker-local" },
  { type: "heartbeat", seq: 5, ts: 1040, phase: "tool", usage: { input: 10, output: 5, totalTokens: 15 }, counts: {} },
  { type: "tool_result", seq: 6, ts: 1050, toolCallId: `${runId}-t1`, name: "ls", isError: false, preview: "notes.md\nsrc/", truncated: false, chars: 13 },
  { type: "assistant_delta", seq: 7, ts: 1060, turn: 2, contentIndex: 0, kind: "text", delta: "Two " },
  { type: "assistant_delta", seq: 8, ts: 1070, turn: 2, contentIndex: 0, kind: "text", delta: "entries." },
  { type: "run_end", seq: 9, ts: 1080, status: "completed", finalText: "Two entries.", stopReason: "stop", usage: { input: 20, output: 9, totalTokens: 29 }, counts: {} },
];

/** What the socket sends for a child: consecutive deltas of a turn merged (firstSeq..seq). */
function liveFrames(runId, taskIndex, batchEntryId) {
  const frames = [{ type: "subagent_run_started", runId: "parent", subagentRunId: runId, batchId: "b1", batchEntryId, toolCallId: "d1", taskIndex, agent: "default", depth: 1, pid: 42 }];
  let pending = null;
  const flush = () => {
    if (pending) frames.push({ type: "subagent_event", runId: "parent", subagentRunId: runId, batchId: "b1", taskIndex, firstSeq: pending.first, seq: pending.event.seq, event: pending.event });
    pending = null;
  };
  for (const event of childEvents(runId)) {
    if (event.type === "assistant_delta" && pending && pending.event.turn === event.turn) {
      pending.event = { ...pending.event, delta: pending.event.delta + event.delta, seq: event.seq, ts: event.ts };
      continue;
    }
    flush();
    if (event.type === "assistant_delta") pending = { first: event.seq, event: { ...event } };
    else frames.push({ type: "subagent_event", runId: "parent", subagentRunId: runId, batchId: "b1", taskIndex, firstSeq: event.seq, seq: event.seq, event });
  }
  flush();
  frames.push({ type: "subagent_run_completed", runId: "parent", subagentRunId: runId, batchId: "b1", taskIndex, agent: "default", status: "completed", errorCode: null, error: null, usage: { input: 20, output: 9, totalTokens: 29 }, eventCount: 9 });
  return frames;
}

const batchEntry = (status = "running") => ({
  type: "subagent_batch", id: "batch1", parentId: "a1", timestamp: "2026-12-01T00:01:00Z", batchId: "b1", mode: "parallel",
  runs: [
    { runId: RUN_A, taskIndex: 0, agent: "default", task: "List the files", status },
    { runId: RUN_B, taskIndex: 1, agent: "default", task: "Describe it", status },
  ],
  metadata: { toolCallId: "d1", parentRunId: "parent", state: "running" },
});

test("a child's stream replayed from the endpoint equals the live one", () => {
  const store = new SessionStore({ sessionId: SID });
  for (const frame of liveFrames(RUN_A, 0, "batch1")) store.receive(frame);
  const live = store.subagents.get(RUN_A);
  assert.equal(live.status, "completed");
  const rows = childEvents(RUN_A).map(({ seq, type, ...payload }) => ({ seq, type, createdAt: "t", payload: { seq, type, ...payload } }));
  const other = new SessionStore({ sessionId: SID });
  other.subagentReplayed(RUN_A, rows);
  assert.deepEqual(childView(other.subagents.get(RUN_A)), childView(live));
  assert.deepEqual(live.items.map((i) => (i.kind === "tool" ? `tool ${i.call.name}: ${i.result.message.content[0].text}` : i.text)), ["Let me look.", "tool ls: notes.md\nsrc/", "Two entries."]);
  // A replay overlapping the live events adds nothing; a hole is marked, not papered over.
  const again = new SessionStore({ sessionId: SID });
  for (const frame of liveFrames(RUN_A, 0, "batch1")) again.receive(frame);
  const before = again.subagents;
  again.subagentReplayed(RUN_A, rows);
  assert.equal(again.subagents, before);
  const holed = applyChildEvent(applyChildEvent(emptyChild("x"), childEvents("x")[0]), childEvents("x")[3]);
  assert.equal(holed.gap, true);
  assert.equal(holed.lastSeq, 1);
});

test("events before their batch entry are held, then the entry replaces them; the tree wins once finished", () => {
  const store = new SessionStore({ sessionId: SID });
  store.setSnapshot(snapshot([user("u1", null, "delegate"), callMsg("a1", "u1", [["d1", "delegate_parallel", {}]])], "a1", 3));
  const frames = [...liveFrames(RUN_A, 0, "batch1"), ...liveFrames(RUN_B, 1, "batch1")];
  for (const frame of frames.slice(0, 4)) store.receive(frame);
  const held = store.heldBatches();
  assert.deepEqual([...held.keys()], ["b1"]);
  assert.deepEqual([...held.get("b1").keys()], [RUN_A]);
  // The batch entry arrives (in flight): nothing is held any more, its rows carry the live state.
  store.receive({ type: "session_entry_added", sessionId: SID, revision: 4, entry: batchEntry(), leafId: "batch1", inFlight: true, context: null });
  assert.ok(store.entry("batch1"), "the batch entry is in the store");
  assert.equal(store.heldBatches().size, 0);
  for (const frame of frames.slice(4)) store.receive(frame);
  const rows = batchRows(store.entry("batch1"), { children: store.subagents, inFlight: true });
  assert.deepEqual(rows.map((r) => [r.agent, r.task, r.status, r.token]), [
    ["default", "List the files", "completed", "done"],
    ["default", "Describe it", "completed", "done"],
  ]);
  assert.equal(rows[0].usage.totalTokens, 29);
  // Finished: the result entries are the truth (here one child failed after all).
  const results = {
    [RUN_B]: { type: "subagent_result", content: { results: [{ status: "timed_out", errorCode: "stalled", error: "no event for 60 s", usage: {} }] } },
  };
  const final = batchRows(batchEntry("completed"), { results, children: store.subagents });
  assert.deepEqual(final.map((r) => [r.status, r.token]), [["completed", "done"], ["timed_out", "timed-out"]]);
  assert.equal(final[1].why, "timed out (stalled): no event for 60 s");
  // A child a budget stopped says which one (its last process event in the result entry).
  const budget = { [RUN_A]: { type: "subagent_result", content: { results: [{ status: "partial", errorCode: null, error: null, usage: {} }] },
    metadata: { processEvents: [{ seq: 7, type: "tool_call", name: "ls" }, { seq: 8, type: "run_end", status: "partial", stopReason: "budget_turns" }] } } };
  const stopped = batchRows(batchEntry("completed"), { results: budget, children: new Map() });
  assert.deepEqual([stopped[0].status, stopped[0].token, stopped[0].why], ["partial", "partial", "stopped by the turn budget (budget_turns)"]);
  // Live, the child's own run_end names the budget; the host's completion (no error code) keeps it.
  let live = applySubagentStream(new Map(), { type: "subagent_event", subagentRunId: "p1", batchId: "b9", taskIndex: 0, firstSeq: 1, seq: 1, event: { type: "run_end", status: "partial", stopReason: "budget_tool_calls" } });
  live = applySubagentStream(live, { type: "subagent_run_completed", subagentRunId: "p1", batchId: "b9", taskIndex: 0, agent: "a", status: "partial", errorCode: null, error: null, usage: {}, eventCount: 1 });
  assert.equal(live.get("p1").errorCode, "budget_tool_calls");
  const liveRows = batchRows({ runs: [{ runId: "p1", taskIndex: 0, agent: "a", task: "t", status: "running" }] }, { children: live, inFlight: true });
  assert.equal(liveRows[0].why, "stopped by the tool-call budget (budget_tool_calls)");
  // A child known only from a late event (no start: a reload came in between) is covered
  // by its batch's entry too, through the batch id.
  store.receive({ type: "subagent_run_completed", runId: "parent", subagentRunId: "late-run", batchId: "b1", taskIndex: 2, agent: "default", status: "cancelled", errorCode: "cancelled", error: null, usage: {}, eventCount: 3 });
  assert.equal(store.heldBatches().size, 0);
  store.receive({ type: "subagent_run_completed", runId: "parent", subagentRunId: "other-run", batchId: "b2", taskIndex: 0, agent: "default", status: "completed", errorCode: null, error: null, usage: {}, eventCount: 3 });
  assert.deepEqual([...store.heldBatches().keys()], ["b2"]);
});

test("every status maps to one of the state tokens", () => {
  for (const status of ["queued", "running", "waiting", "completed", "partial", "failed", "lost", "cancelled", "aborted", "timed_out", "error", "pending", "in_progress"]) {
    assert.ok(STATE_TOKENS.includes(stateToken(status)), status);
  }
  assert.deepEqual(["partial", "failed", "cancelled", "timed_out"].map(stateToken), ["partial", "failed", "aborted", "timed-out"]);
});
