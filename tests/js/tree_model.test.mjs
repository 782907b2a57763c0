// The tree sidebar's rows and the conversation's items (pure parts of the page).
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildRows, continueTarget, firstLine, leavesBranch, rowText } from "../../static/chat/tree_model.js";
import { conversationItems, retryTarget } from "../../static/chat/conversation_model.js";

const user = (id, parentId, text) => ({ type: "message", id, parentId, timestamp: "t", message: { role: "user", content: [{ type: "text", text }] } });
const assistant = (id, parentId, text, calls = [], stopReason = "stop") => ({
  type: "message", id, parentId, timestamp: "t",
  message: { role: "assistant", content: [{ type: "text", text }, ...calls.map((c) => ({ type: "toolCall", id: c, name: "ls", arguments: {} }))], stopReason, usage: { input: 10, output: 2, cost: { total: 0.5 } } },
});
const result = (id, parentId, callId) => ({ type: "message", id, parentId, timestamp: "t", message: { role: "toolResult", toolCallId: callId, toolName: "ls", content: [{ type: "text", text: "a\nb" }], isError: false } });

function snapshotOf(entries, leafId, labels = {}) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const children = {};
  for (const e of entries) (children[e.parentId ?? "root"] ??= []).push(e.id);
  const path = [];
  for (let c = leafId; c; c = byId.get(c).parentId) path.unshift(c);
  return {
    snapshot: { entries, leafId, activePath: path, childrenByParentId: children, labelsByEntryId: labels, inFlight: null, page: { truncated: false } },
    lookup: (id) => byId.get(id),
  };
}

// u1 - a1(call c1) - r1 - a2      (branch 1)
//    \ a3 - label(on u1)          (branch 2, the leaf)
const entries = [
  user("u1", null, "hello"),
  assistant("a1", "u1", "**Let** me look", ["c1"], "toolUse"),
  result("r1", "a1", "c1"),
  assistant("a2", "r1", "done"),
  assistant("a3", "u1", "other answer", [], "error"),
  { type: "label", id: "l1", parentId: "a3", timestamp: "t", targetId: "u1", label: "start" },
];

test("rows: chains stay flat, branch points indent their children, the path and leaf are marked", () => {
  const { snapshot, lookup } = snapshotOf(entries, "l1", { u1: "start" });
  const { rows } = buildRows({ snapshot, lookup, notes: true });
  assert.deepEqual(rows.map((r) => [r.id, r.depth]), [["u1", 0], ["a1", 1], ["r1", 1], ["a2", 1], ["a3", 1], ["l1", 1]]);
  const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
  assert.equal(byId.u1.branchPoint, 2);
  assert.equal(byId.u1.label, "start");
  assert.deepEqual(rows.filter((r) => r.onPath).map((r) => r.id), ["u1", "a3", "l1"]);
  assert.equal(byId.l1.isLeaf, true);
  assert.equal(rowText(byId.a1), "Let me look [ls]");
});

test("filters hide nodes and hand their children up; the leaf always shows", () => {
  const { snapshot, lookup } = snapshotOf(entries, "l1", { u1: "start" });
  assert.deepEqual(buildRows({ snapshot, lookup, filter: "messages", notes: true }).rows.map((r) => [r.id, r.depth]), [["u1", 0], ["a1", 1], ["a2", 1], ["a3", 1], ["l1", 1]]);
  assert.deepEqual(buildRows({ snapshot, lookup, filter: "labeled", notes: true }).rows.map((r) => r.id), ["u1", "l1"]);
  assert.deepEqual(buildRows({ snapshot, lookup, collapsed: new Set(["u1"]) }).rows.map((r) => r.id), ["u1"]);
});

test("bookkeeping (titles, labels, model and thinking changes) folds into the entry before it; the leaf mark goes with it", () => {
  const more = [
    ...entries,
    { type: "session_info", id: "s1", parentId: "a2", timestamp: "t", name: "Hello there" },
    { type: "thinking_level_change", id: "t1", parentId: "s1", timestamp: "t", thinkingLevel: "high" },
    user("u2", "t1", "next | **question**"),
  ];
  const { snapshot, lookup } = snapshotOf(more, "l1", { u1: "start" });
  const folded = buildRows({ snapshot, lookup });
  assert.deepEqual(folded.rows.map((r) => r.id), ["u1", "a1", "r1", "a2", "u2", "a3"]);
  assert.equal(folded.leafId, "a3"); // the label l1 is the leaf: its row is the answer it follows
  assert.equal(folded.rows.find((r) => r.id === "a3").isLeaf, true);
  assert.deepEqual(buildRows({ snapshot, lookup, notes: true }).rows.map((r) => r.id), ["u1", "a1", "r1", "a2", "s1", "t1", "u2", "a3", "l1"]);
  assert.deepEqual(buildRows({ snapshot, lookup, filter: "labeled" }).rows.map((r) => r.id), ["u1", "a3"]);
  assert.equal(rowText(folded.rows.find((r) => r.id === "u2")), "next | question");
});

test("a 10k-deep chain is flattened without recursion", () => {
  const chain = [user("e0", null, "start")];
  for (let i = 1; i < 10_000; i++) chain.push(i % 2 ? assistant(`e${i}`, `e${i - 1}`, `a${i}`) : user(`e${i}`, `e${i - 1}`, `u${i}`));
  const { snapshot, lookup } = snapshotOf(chain, "e9999");
  const { rows } = buildRows({ snapshot, lookup });
  assert.equal(rows.length, 10_000);
  assert.ok(rows.every((r) => r.depth === 0 && r.onPath));
});

test("continue from here follows Pi's rule", () => {
  assert.deepEqual(continueTarget(entries[0]), { mode: "edit", text: "hello", branchFrom: null });
  assert.deepEqual(continueTarget(entries[3]), { mode: "leaf", leafId: "a2" });
  const { snapshot, lookup } = snapshotOf(entries, "a1");
  assert.equal(leavesBranch(snapshot, lookup, "a2"), false); // forward along the path
  assert.equal(leavesBranch(snapshot, lookup, "a3"), true);
  assert.equal(firstLine(entries[4]), "error:");
});

test("conversation items: tool results join their call, labels stay out, turn usage adds up", () => {
  const { snapshot, lookup } = snapshotOf(entries, "a2");
  const items = conversationItems(snapshot, lookup);
  assert.deepEqual(items.map((i) => i.id), ["u1", "a1", "a2"]);
  assert.equal(items[1].results.c1.id, "r1");
  assert.equal(items[1].turnUsage, null);
  assert.equal(items[2].turnUsage.cost, 1);
  assert.equal(retryTarget(snapshot, lookup, "a3").id, "u1");
});
