// Entries the page cannot draw are marked, one by one; the others are drawn.
// Pure parts: entry_check.js and conversation_model.js.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blockProblem, entryProblem, entryTypeName, num, text } from "../../static/chat/entry_check.js";
import { conversationItems, formatCost, formatTokens } from "../../static/chat/conversation_model.js";
import { buildRows, firstLine, rowText } from "../../static/chat/tree_model.js";
import { ROOT_KEY } from "../../static/chat/tree_events.js";

const user = (id, parentId, content) => ({ type: "message", id, parentId, timestamp: "t", message: { role: "user", content } });
const assistant = (id, parentId, message) => ({ type: "message", id, parentId, timestamp: "t", message: { role: "assistant", content: [{ type: "text", text: "ok" }], stopReason: "stop", ...message } });

function world(entries) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const children = {};
  for (const e of entries) (children[e.parentId ?? ROOT_KEY] ??= []).push(e.id);
  const snapshot = { entries, leafId: entries.at(-1).id, activePath: entries.map((e) => e.id), childrenByParentId: children, labelsByEntryId: {}, inFlight: null, page: { truncated: false } };
  return { snapshot, lookup: (id) => byId.get(id) };
}

// One good message between each bad one: every bad one is marked, every good one drawn.
const BAD = [
  ["cost as a string", assistant("b1", "g0", { usage: { input: 1, output: 2, cost: { total: "0.5" } } }), null],
  ["content not a list", assistant("b2", "g1", { content: "just text" }), "content is text where a list of blocks belongs"],
  ["content an object", assistant("b3", "g2", { content: { type: "text", text: "x" } }), "content is object, not a list of blocks"],
  ["no role", { type: "message", id: "b4", parentId: "g3", message: { content: [] } }, "the message has no role"],
  ["no message", { type: "message", id: "b5", parentId: "g4" }, "the message is missing or not an object"],
  ["role a number", { type: "message", id: "b6", parentId: "g5", message: { role: 7, content: [] } }, "the message's role is not a string"],
  ["summary an object", { type: "compaction", id: "b7", parentId: "g6", summary: { a: 1 }, firstKeptEntryId: "g0", tokensBefore: 5 }, "summary is not a string"],
  ["usage a string", assistant("b8", "g7", { usage: "lots" }), "usage is not an object"],
  ["tool result with a numeric call id", { type: "message", id: "b9", parentId: "g8", message: { role: "toolResult", toolCallId: 5, content: [] } }, "toolCallId is not a string"],
];

test("entryProblem names what is wrong, and only when something is", () => {
  for (const [name, entry, expected] of BAD) assert.equal(entryProblem(entry), expected, name);
  assert.equal(entryProblem(user("u", null, "plain text is fine for a user")), null);
  assert.equal(entryProblem(user("u", null, [{ type: "text", text: "blocks too" }])), null);
  assert.equal(entryProblem({ type: "label", id: "l", targetId: "u", label: "x" }), null);
  assert.equal(entryProblem({ type: "some_future_type", id: "f" }), null); // drawn as a note
  assert.equal(entryProblem(null), "not an entry object");
  assert.equal(entryProblem({ type: "message" }), "the entry has no id");
  assert.equal(entryProblem({ id: "x" }), "the entry has no type");
});

test("blockProblem marks unknown and ill-typed blocks in place", () => {
  assert.equal(blockProblem({ type: "text", text: "hi" }, "assistant"), null);
  assert.equal(blockProblem({ type: "toolCall", id: "c", name: "ls", arguments: {} }, "assistant"), null);
  assert.match(blockProblem({ type: "hologram", data: 1 }, "assistant"), /unknown type “hologram”/);
  assert.match(blockProblem({ type: "toolCall", id: "c", name: "ls", arguments: "x" }, "user"), /unknown type/); // users send no tool calls
  assert.equal(blockProblem({ type: "text", text: 5 }, "assistant"), "text is not a string");
  assert.match(blockProblem("a string", "assistant"), /not an object/);
  assert.match(blockProblem(null, "assistant"), /not an object/);
  assert.equal(blockProblem({ text: "no type" }, "assistant"), "a content block without a type");
  assert.equal(blockProblem({ type: "toolCall", id: "c", name: "ls", arguments: [1] }, "assistant"), "tool call with a bad id, name or arguments");
});

test("conversationItems lists every entry: the bad ones as unrenderable items in their place", () => {
  const entries = [];
  let parent = null;
  BAD.forEach(([, bad], i) => {
    entries.push(assistant(`g${i}`, parent, {}));
    entries.push({ ...bad, parentId: `g${i}` });
    parent = bad.id;
  });
  entries.push(assistant("last", parent, {}));
  const { snapshot, lookup } = world(entries);
  const items = conversationItems(snapshot, lookup);
  assert.deepEqual(items.map((i) => i.id), entries.map((e) => e.id));
  for (const [name, bad, expected] of BAD) {
    const item = items.find((i) => i.id === bad.id);
    if (expected === null) assert.equal(item.kind, "assistant", name);
    else {
      assert.equal(item.kind, "unrenderable", name);
      assert.equal(item.problem, expected, name);
      assert.ok(item.typeName, name);
    }
  }
  assert.ok(items.filter((i) => i.id.startsWith("g") || i.id === "last").every((i) => i.kind === "assistant"));
});

test("usage numbers another writer got wrong do not poison the turn's totals", () => {
  const entries = [
    user("u", null, "hi"),
    assistant("a1", "u", { usage: { input: 10, output: 2, cost: { total: 0.25 } } }),
    assistant("a2", "a1", { usage: { input: "many", output: null, cost: { total: "0.5" } } }),
    assistant("a3", "a2", { usage: { input: 5, output: NaN, cost: { total: 0.25 } } }),
  ];
  const { snapshot, lookup } = world(entries);
  const items = conversationItems(snapshot, lookup);
  const turn = items.at(-1).turnUsage;
  assert.deepEqual([turn.input, turn.output, turn.cost, turn.messages], [15, 2, 0.5, 3]);
  assert.equal(formatCost(turn.cost), "$0.50");
});

test("the formatters and text helper take any JSON value", () => {
  assert.equal(formatCost("0.5"), "$?");
  assert.equal(formatCost({}), "$?");
  assert.equal(formatCost(undefined), "$0");
  assert.equal(formatCost(NaN), "$?");
  assert.equal(formatTokens("12"), "?");
  assert.equal(num("1"), null);
  assert.equal(num(Infinity), null);
  assert.equal(num(3), 3);
  assert.equal(text({ a: 1 }), '{"a":1}');
  assert.equal(text(null), "");
  assert.equal(text(5), "5");
  assert.equal(entryTypeName({ type: "message", message: { role: "assistant" } }), "message/assistant");
  assert.equal(entryTypeName({ type: "message" }), "message/?");
  assert.equal(entryTypeName(null), "object");
});

test("the tree's one-line texts never throw on a bad entry", () => {
  for (const [name, bad] of BAD) assert.equal(typeof firstLine(bad), "string", name);
  const weird = { type: "message", id: "w", parentId: null, message: { role: "assistant", content: [{ type: "toolCall", name: { not: "a string" } }], stopReason: "stop" } };
  assert.equal(typeof firstLine(weird), "string");
  const entries = [user("u", null, "hi"), ...BAD.map(([, bad]) => ({ ...bad, parentId: "u" }))];
  const { snapshot, lookup } = world(entries);
  const { rows } = buildRows({ snapshot, lookup, filter: "all", collapsed: new Set() });
  assert.equal(rows.length, entries.length);
  for (const row of rows) assert.equal(typeof rowText(row), "string");
});
