// The everyday chat page's pure parts: one answer one card, summaries only for long
// branches, the plan's pinning, batch outcomes, titles cut where they read well, documents,
// feedback, the session list's groups, and the bundler's rules (through the bundle it made).
import assert from "node:assert/strict";
import { test } from "node:test";

import { conversationItems, groupTurns, streamedTokens, turnParts } from "../../static/chat/conversation_model.js";
import { messagesLeft } from "../../static/chat/tree_model.js";
import { planAt, planPinned } from "../../static/chat/plan.js";
import { batchOutcome } from "../../static/chat/subagents.js";
import { cutText, plainText } from "../../static/chat/plain_text.js";
import { documentOf, isDocumentFile, splitDocuments } from "../../static/chat/documents.js";
import { feedbackFor } from "../../static/chat/feedback_model.js";
import { dateGroup, groupSessions } from "../../static/chat/session_groups.js";

const user = (id, parentId, text) => ({ type: "message", id, parentId, message: { role: "user", content: [{ type: "text", text }] } });
const assistant = (id, parentId, content, stopReason = "stop", usage = { input: 10, output: 5, cost: { total: 0.01 } }) => ({
  type: "message", id, parentId, message: { role: "assistant", content, stopReason, usage, model: "m" },
});
const result = (id, parentId, callId, isError = false) => ({ type: "message", id, parentId, message: { role: "toolResult", toolCallId: callId, toolName: "bash", content: [{ type: "text", text: "out" }], isError } });

function snap(entries, leafId) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const path = [];
  for (let c = leafId; c; c = byId.get(c).parentId) path.unshift(c);
  const childrenByParentId = {};
  for (const e of entries) (childrenByParentId[e.parentId ?? "root"] ??= []).push(e.id);
  return { snapshot: { entries, leafId, activePath: path, childrenByParentId, labelsByEntryId: {}, inFlight: null }, lookup: (id) => byId.get(id) };
}

test("a turn's model calls are one card: steps, the answer, the turn's usage", () => {
  const entries = [
    user("u", null, "go"),
    assistant("a1", "u", [{ type: "thinking", thinking: "hm" }, { type: "text", text: "Let me look." }, { type: "toolCall", id: "c1", name: "ls", arguments: {} }], "toolUse"),
    result("r1", "a1", "c1"),
    assistant("a2", "r1", [{ type: "toolCall", id: "c2", name: "bash", arguments: { command: "x" } }], "toolUse"),
    result("r2", "a2", "c2", true),
    assistant("a3", "r2", [{ type: "text", text: "Done." }]),
    user("u2", "a3", "next"),
    assistant("a4", "u2", [{ type: "thinking", thinking: "easy" }, { type: "text", text: "Sure." }]),
  ];
  const { snapshot, lookup } = snap(entries, "a4");
  const items = groupTurns(conversationItems(snapshot, lookup));
  assert.deepEqual(items.map((i) => [i.kind, i.id]), [["user", "u"], ["turn", "a1"], ["user", "u2"], ["turn", "a4"]]);
  const turn = items[1];
  assert.equal(turn.entry.id, "a3");
  assert.ok(turn.ids.includes("r2;"));
  assert.deepEqual(turn.turnUsage, { input: 30, output: 15, cacheRead: 0, cost: 0.03, messages: 3, estimated: false });
  const parts = turnParts(turn);
  assert.equal(parts.final, "Done.");
  assert.equal(parts.stepCount, 3); // interim text, ls, bash
  assert.equal(parts.errors, 1);
  assert.deepEqual(parts.tools, ["ls", "bash"]);
  assert.equal(turnParts(items[3]).onlyThinking, true);
  assert.equal(turnParts(items[3]).final, "Sure.");
});

test("an answer continued after the output limit reads as one text", () => {
  const entries = [
    user("u", null, "long"),
    assistant("a1", "u", [{ type: "text", text: "The first part" }], "length"),
    { type: "custom_message", id: "k", parentId: "a1", customType: "neta.continue", content: "go on", display: false },
    assistant("a2", "k", [{ type: "text", text: " and the rest." }]),
  ];
  const { snapshot, lookup } = snap(entries, "a2");
  const items = groupTurns(conversationItems(snapshot, lookup));
  assert.equal(items.length, 2);
  const parts = turnParts(items[1]);
  assert.equal(parts.final, "The first part and the rest.");
  assert.equal(parts.stepCount, 0);
});

test("an aborted answer's output tokens are estimated from what streamed", () => {
  assert.equal(streamedTokens({ content: [{ type: "text", text: "x".repeat(40) }] }), 10);
  assert.equal(streamedTokens({ content: [] }), 0);
});

test("a summary is offered by messages left behind", () => {
  const entries = [user("u1", null, "a"), assistant("a1", "u1", []), user("u2", "a1", "b"), assistant("a2", "u2", []), user("u3", "a2", "c"), assistant("a3", "u3", [])];
  const { snapshot, lookup } = snap(entries, "a3");
  assert.equal(messagesLeft(snapshot, lookup, "a1"), 4);
  assert.equal(messagesLeft(snapshot, lookup, "u1"), 5);
  assert.equal(messagesLeft(snapshot, lookup, "a3"), 0);
});

test("a finished plan is pinned only while its run goes on", () => {
  const todo = (id, parentId, statuses) => ({ type: "message", id, parentId, message: { role: "toolResult", toolName: "todo", toolCallId: id, isError: false, content: [], details: { todos: statuses.map((s, i) => ({ content: `t${i}`, status: s })) } } });
  const entries = [user("u", null, "plan"), todo("t", "u", ["completed", "completed"]), assistant("a", "t", []), user("u2", "a", "more"), assistant("a2", "u2", [])];
  const { snapshot, lookup } = snap(entries, "a");
  const plan = planAt(snapshot, lookup);
  assert.equal(planPinned(plan, snapshot, lookup, true), true);
  assert.equal(planPinned(plan, snapshot, lookup, false), false);
  const later = snap(entries, "a2");
  assert.equal(planPinned(planAt(later.snapshot, later.lookup), later.snapshot, later.lookup, true), false); // a later turn
  const open = snap([user("u", null, "plan"), todo("t", "u", ["completed", "pending"])], "t");
  assert.equal(planPinned(planAt(open.snapshot, open.lookup), open.snapshot, open.lookup, false), true);
});

test("a batch with completed and cancelled children is partial", () => {
  assert.equal(batchOutcome(["completed", "completed", "cancelled"]), "partial");
  assert.equal(batchOutcome(["completed", "failed", "cancelled"]), "failed");
  assert.equal(batchOutcome(["cancelled", "cancelled"]), "cancelled");
  assert.equal(batchOutcome(["completed", "completed"], "cancelled"), "cancelled");
  assert.equal(batchOutcome(["completed"]), "completed");
  assert.equal(batchOutcome(["completed", "partial"]), "partial");
});

test("titles and rows are cut where they read well", () => {
  assert.equal(cutText("What is in my workspace? Give me a short overview.", 30), "What is in my workspace?");
  assert.equal(cutText("Explain how a git rebase differs from a merge, with a small example.", 40), "Explain how a git rebase differs from…");
  assert.equal(cutText("请告诉我工作区里有哪些文件以及每个文件的用途", 10), "请告诉我工作区里有…");
  assert.equal(cutText("👍🏽👍🏽👍🏽👍🏽", 3), "👍🏽👍🏽…"); // whole characters
  assert.equal(cutText("short", 10), "short");
  assert.equal(plainText("| a | **b** |\n|---|:--:|\n| 1 | 2 |"), "a · b\n1 · 2");
  assert.equal(plainText("cut **bold"), "cut bold");
});

test("documents: the wrapper read back, files taken by type and name", () => {
  const block = { type: "text", text: '<document name="a &quot;b&quot;.md" type="text/markdown" chars="5">\nhello\n</document>' };
  assert.deepEqual(documentOf(block), { name: 'a "b".md', type: "text/markdown", chars: 5, pages: null, text: "hello" });
  assert.equal(documentOf({ type: "text", text: "<document>no" }), null);
  const split = splitDocuments([{ type: "text", text: "ask" }, block, { type: "image", data: "x", mimeType: "image/png" }]);
  assert.equal(split.text, "ask");
  assert.equal(split.documents.length, 1);
  assert.ok(isDocumentFile({ name: "x.pdf", type: "" }));
  assert.ok(isDocumentFile({ name: "main.rs", type: "" }));
  assert.ok(isDocumentFile({ name: "Makefile", type: "" }));
  assert.ok(!isDocumentFile({ name: "a.zip", type: "application/zip" }));
});

test("feedback: the latest entry on an answer counts; null takes it back", () => {
  const fb = (id, entryId, rating) => ({ type: "custom", id, customType: "neta.feedback", data: { entryId, rating, note: "n" } });
  assert.deepEqual(feedbackFor({ entries: [fb("f1", "a", "up"), fb("f2", "a", "down")] }, null, "a"), { rating: "down", note: "n" });
  assert.equal(feedbackFor({ entries: [fb("f1", "a", "up"), fb("f2", "a", null)] }, null, "a"), null);
  assert.equal(feedbackFor({ entries: [] }, null, "a"), null);
});

test("session groups: pinned first, then by day", () => {
  const now = new Date(2026, 11, 4, 12);
  const at = (days) => new Date(now.getTime() - days * 86_400_000).toISOString();
  assert.equal(dateGroup(at(0), now), "Today");
  assert.equal(dateGroup(at(1), now), "Yesterday");
  assert.equal(dateGroup(at(3), now), "Previous 7 days");
  assert.equal(dateGroup(at(20), now), "Previous 30 days");
  const groups = groupSessions([{ sessionId: "a", updatedAt: at(3) }, { sessionId: "b", updatedAt: at(0), pinned: true }, { sessionId: "c", updatedAt: at(0) }], now);
  assert.deepEqual(groups.map((g) => [g.label, g.sessions.map((s) => s.sessionId)]), [["Pinned", ["b"]], ["Today", ["c"]], ["Previous 7 days", ["a"]]]);
});
