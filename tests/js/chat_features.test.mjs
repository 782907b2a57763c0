// Versions, slash commands and queued messages of the chat page: pure logic.
import assert from "node:assert/strict";
import { test } from "node:test";

import { stepVersion, versionLeaf, versionsOf } from "../../static/chat/versions_model.js";
import { completeSlash, parseSlash, slashSuggestions, stillQueued } from "../../static/chat/composer_model.js";

const user = (id, parentId, text) => ({ type: "message", id, parentId, message: { role: "user", content: [{ type: "text", text }] } });
const answer = (id, parentId, text) => ({ type: "message", id, parentId, message: { role: "assistant", content: [{ type: "text", text }] } });

// u1 ─┬ a1 ─ u2 ─ a2
//     ├ a1b ─ u4 ─ a4      (a regenerated answer, then more)
//     └ t1 (thinking change: not a version of an answer)
// u3 (an edited first prompt, a sibling of u1 at the root)
function tree() {
  const entries = [
    user("u1", null, "first"),
    answer("a1", "u1", "one"),
    user("u2", "a1", "second"),
    answer("a2", "u2", "two"),
    answer("a1b", "u1", "one again"),
    user("u4", "a1b", "more"),
    answer("a4", "u4", "four"),
    { type: "thinking_level_change", id: "t1", parentId: "u1", thinkingLevel: "high" },
    user("u3", null, "first, edited"),
  ];
  const byId = new Map(entries.map((e) => [e.id, e]));
  const childrenByParentId = {};
  for (const e of entries) (childrenByParentId[e.parentId ?? "root"] ??= []).push(e.id);
  return { snapshot: { entries, childrenByParentId, inFlight: null, leafId: "a2" }, lookup: (id) => byId.get(id) };
}

test("versions are the parent's children of the same kind", () => {
  const { snapshot, lookup } = tree();
  assert.deepEqual(versionsOf(snapshot, lookup, "a1"), { ids: ["a1", "a1b"], index: 0 });
  assert.deepEqual(versionsOf(snapshot, lookup, "a1b"), { ids: ["a1", "a1b"], index: 1 });
  assert.deepEqual(versionsOf(snapshot, lookup, "u3"), { ids: ["u1", "u3"], index: 1 });
  assert.equal(versionsOf(snapshot, lookup, "u2"), null); // no siblings
  assert.equal(versionsOf(snapshot, lookup, "t1"), null); // not a message
  assert.equal(versionsOf(snapshot, lookup, "missing"), null);
});

test("an answer still streaming is not a version yet", () => {
  const { snapshot, lookup } = tree();
  assert.equal(versionsOf({ ...snapshot, inFlight: { id: "a1b" } }, lookup, "a1"), null);
});

test("picking a version moves the leaf to the newest end of its subtree", () => {
  const { snapshot, lookup } = tree();
  assert.equal(versionLeaf(snapshot, "a1b"), "a4");
  assert.equal(versionLeaf(snapshot, "u1"), "t1"); // the last child at every step
  assert.deepEqual(stepVersion(snapshot, lookup, "a1", +1), { entryId: "a1b", leafId: "a4" });
  assert.deepEqual(stepVersion(snapshot, lookup, "a1b", -1), { entryId: "a1", leafId: "a2" });
  assert.equal(stepVersion(snapshot, lookup, "a1", -1), null);
  assert.equal(stepVersion(snapshot, lookup, "a1b", +1), null);
});

test("slash commands parse with their arguments; unknown ones are errors; // escapes", () => {
  assert.deepEqual(parseSlash("/compact"), { name: "compact", args: "" });
  assert.deepEqual(parseSlash("/compact  keep the API decisions "), { name: "compact", args: "keep the API decisions" });
  assert.deepEqual(parseSlash("/name  Trees and leaves"), { name: "name", args: "Trees and leaves" });
  assert.deepEqual(parseSlash("/fork"), { name: "fork", args: "" });
  assert.deepEqual(parseSlash("/tree\n"), { name: "tree", args: "" });
  assert.match(parseSlash("/name").error, /needs a title/);
  assert.match(parseSlash("/fork now").error, /no arguments/);
  assert.match(parseSlash("/frobnicate").error, /Unknown command \/frobnicate/);
  assert.equal(parseSlash("//not a command"), null);
  assert.equal(parseSlash("hello /compact"), null);
});

test("completion offers the commands that start with what was typed", () => {
  assert.deepEqual(slashSuggestions("/").map((c) => c.name), ["compact", "fork", "name", "tree"]);
  assert.deepEqual(slashSuggestions("/co").map((c) => c.name), ["compact"]);
  assert.deepEqual(slashSuggestions("/compact x"), []); // past the name
  assert.deepEqual(slashSuggestions("hi"), []);
  assert.equal(completeSlash({ name: "name", args: "<title>" }), "/name ");
  assert.equal(completeSlash({ name: "tree", args: "" }), "/tree");
});

test("a queued message stays until the tree holds it, all go when the run ends", () => {
  const entries = [user("u1", null, "again"), answer("a1", "u1", "x")];
  const items = [
    { id: 1, text: "again", mode: "follow_up", seen: 1 },
    { id: 2, text: "later", mode: "steer", seen: 0 },
  ];
  assert.equal(stillQueued(items, entries, true), items); // nothing taken: the same list
  const taken = [...entries, user("u2", "a1", "again")];
  assert.deepEqual(stillQueued(items, taken, true).map((i) => i.id), [2]);
  assert.deepEqual(stillQueued(items, taken, false), []);
  // Two queued with one text: one user message takes one of them.
  const twice = [
    { id: 3, text: "same", seen: 0 },
    { id: 4, text: "same", seen: 0 },
  ];
  assert.deepEqual(stillQueued(twice, [user("s1", null, "same")], true).map((i) => i.id), [4]);
});

test("the pickers send a model only when one was picked and is offered, a level only where the model thinks", async () => {
  const { chosenModel, promptChoice } = await import("../../static/chat/composer_model.js");
  const agentModel = { name: "main", supportsThinking: true, supportsImages: true };
  const models = [agentModel, { name: "plain", supportsThinking: false, supportsImages: false }];
  assert.deepEqual(promptChoice(models, null, agentModel), {});
  assert.deepEqual(promptChoice(models, { thinkingLevel: "high" }, agentModel), { thinkingLevel: "high" });
  assert.deepEqual(promptChoice(models, { model: "plain", thinkingLevel: "high" }, agentModel), { model: "plain" });
  assert.deepEqual(promptChoice(models, { model: "gone" }, agentModel), {}); // no longer offered: the agent's
  assert.equal(chosenModel(models, { model: "gone" }, agentModel).name, "main");
  assert.equal(chosenModel([], null, agentModel).name, "main");
});
