// The approval panel's pure part: the call a waiting run waits on is the first open call of
// the leaf's assistant message (not a question, not once a result or a user message follows),
// with decision entries (custom) in between ignored; the prefix offered for bash.
import assert from "node:assert/strict";
import { test } from "node:test";
import { commandPrefix, openApproval } from "../../static/chat/approval.js";
import { applyChildEvent, approvalsKey, emptyChild } from "../../static/chat/subagents.js";

const entries = {
  u: { id: "u", type: "message", message: { role: "user", content: [{ type: "text", text: "go" }] } },
  a: {
    id: "a", type: "message",
    message: { role: "assistant", content: [
      { type: "text", text: "Two calls." },
      { type: "toolCall", id: "c1", name: "ls", arguments: {} },
      { type: "toolCall", id: "c2", name: "bash", arguments: { command: "make clean" } },
    ] },
  },
  r1: { id: "r1", type: "message", message: { role: "toolResult", toolCallId: "c1", content: [] } },
  d: { id: "d", type: "custom", customType: "neta.approval", data: { decision: "allow" } },
  q: { id: "q", type: "message", message: { role: "assistant", content: [{ type: "toolCall", id: "c3", name: "ask_user", arguments: { question: "?" } }] } },
  r2: { id: "r2", type: "message", message: { role: "toolResult", toolCallId: "c2", content: [] } },
};
const lookup = (id) => entries[id];

test("the first open call of the leaf's answer is the request", () => {
  const request = openApproval({ activePath: ["u", "a"] }, lookup);
  assert.equal(request.toolCallId, "c1");
  assert.equal(request.waiting, 2);
  const later = openApproval({ activePath: ["u", "a", "r1", "d"] }, lookup);
  assert.deepEqual([later.toolCallId, later.tool, later.command], ["c2", "bash", "make clean"]);
});

test("no request once every call has its result, after a user message, or for a question", () => {
  assert.equal(openApproval({ activePath: ["u", "a", "r1", "r2"] }, lookup), null);
  assert.equal(openApproval({ activePath: ["u", "a", "r1", "r2", "u"] }, lookup), null);
  assert.equal(openApproval({ activePath: ["u", "q"] }, lookup), null);
  assert.equal(openApproval({ activePath: [] }, lookup), null);
});

test("the prefix offered is the command's first word", () => {
  assert.equal(commandPrefix("  git   status -s"), "git ");
  assert.equal(commandPrefix(""), "");
});

// A child's request: the key the page reads `approvals/` again on changes when a child starts
// waiting, when its heartbeat says it is past the wait, and when the call's result comes.

test("the children's approvals key follows a child's request from asked to decided", () => {
  const run = (child) => new Map([["r1", child]]);
  let child = emptyChild("r1");
  const ev = (seq, type, extra = {}) => ({ seq, type, ts: seq, ...extra });
  child = applyChildEvent(child, ev(1, "run_start", { pid: 1 }));
  child = applyChildEvent(child, ev(2, "tool_call", { toolCallId: "c1", name: "bash", arguments: { command: "make" } }));
  assert.equal(approvalsKey(run(child)), "");
  child = applyChildEvent(child, ev(3, "approval_request", { toolCallId: "c1", name: "bash", requestId: "q", request: {} }));
  const asked = approvalsKey(run(child));
  assert.match(asked, /^r1\/c1\//);
  child = applyChildEvent(child, ev(4, "heartbeat", { phase: "approval" }));
  assert.equal(approvalsKey(run(child)), "r1/c1/waiting");
  child = applyChildEvent(child, ev(5, "heartbeat", { phase: "tool" }));
  assert.equal(approvalsKey(run(child)), "r1/c1/tool"); // decided: the page reads the list again
  child = applyChildEvent(child, ev(6, "tool_result", { toolCallId: "c1", name: "bash", isError: false, preview: "ok" }));
  assert.equal(approvalsKey(run(child)), "");
  assert.equal(child.lastActivity, "bash done");
});
