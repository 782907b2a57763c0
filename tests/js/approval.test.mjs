// The approval panel's pure part: the call a waiting run waits on is the first open call of
// the leaf's assistant message (not a question, not once a result or a user message follows),
// with decision entries (custom) in between ignored; the prefix offered for bash.
import assert from "node:assert/strict";
import { test } from "node:test";
import { commandPrefix, openApproval } from "../../static/chat/approval.js";

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
