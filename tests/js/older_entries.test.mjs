// Paging entries older than a truncated snapshot's window into the tree.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SessionStore } from "../../static/chat/store.js";
import { buildRows, withOlder } from "../../static/chat/tree_model.js";

const msg = (id, parentId, role) => ({ type: "message", id, parentId, timestamp: "t", message: { role, content: [{ type: "text", text: id }] } });

// Stored order (positions 0..8). The leaf a2's path is u0 a0 u1 a1 u2 a2; b1-b3 is an
// abandoned branch off a0.
const ALL = [
  msg("u0", null, "user"), msg("a0", "u0", "assistant"),
  msg("b1", "a0", "user"), msg("b2", "b1", "assistant"), msg("b3", "b2", "user"),
  msg("u1", "a0", "user"), msg("a1", "u1", "assistant"), msg("u2", "a1", "user"), msg("a2", "u2", "assistant"),
];

// What build_snapshot sends with limit 6: the last six in stored order (b2..a2) plus the
// path entries older than them (u0, a0), in stored order; b1 is left out.
function truncatedSnapshot() {
  const entries = ["u0", "a0", "b2", "b3", "u1", "a1", "u2", "a2"].map((id) => ALL.find((e) => e.id === id));
  const childrenByParentId = {};
  for (const e of entries) (childrenByParentId[e.parentId ?? "root"] ??= []).push(e.id);
  return {
    session: { sessionId: "s" }, revision: 9, leafId: "a2", entries,
    activePath: ["u0", "a0", "u1", "a1", "u2", "a2"], childrenByParentId, labelsByEntryId: {}, inFlight: null,
    runtimeContext: null,
    page: { totalEntries: 9, includedEntries: 8, truncated: true, activePathLength: 6, activePathTruncated: false, limit: 6 },
  };
}

function storeWith(snapshot) {
  const store = new SessionStore({ sessionId: "s" });
  store.setSnapshot(snapshot);
  return store;
}

const fetchFrom = (calls) => async (cursor, limit) => {
  calls.push([cursor, limit]);
  return ALL.slice(cursor, cursor + limit);
};

test("older pages fill the tree in stored order until nothing is left out", async () => {
  const store = storeWith(truncatedSnapshot());
  const lookup = (id) => store.entry(id);
  assert.equal(store.older.below, 3); // the window starts at position 3
  let rows = buildRows({ snapshot: store.treeSnapshot(), lookup }).rows;
  assert.ok(rows.some((r) => r.id === "b2" && r.depth === 0), "b2's parent is not loaded: it stands as a root");

  const calls = [];
  assert.equal(await store.loadOlder(fetchFrom(calls), 2), 2); // positions 1 and 2: a0 (again) and b1
  assert.deepEqual(calls, [[1, 2]]);
  const view = store.treeSnapshot();
  assert.deepEqual(view.entries.map((e) => e.id), ALL.map((e) => e.id));
  assert.deepEqual(view.childrenByParentId.a0, ["b1", "u1"]); // stored order
  assert.equal(view.page.truncated, true); // position 0 has not been fetched yet
  rows = buildRows({ snapshot: view, lookup }).rows;
  assert.deepEqual(rows.filter((r) => r.depth === 0).map((r) => r.id), ["u0", "a0"]);
  assert.equal(rows.find((r) => r.id === "a0").branchPoint, 2);

  assert.equal(await store.loadOlder(fetchFrom(calls), 2), 1);
  assert.deepEqual(calls, [[1, 2], [0, 1]]);
  assert.equal(store.older.below, 0);
  assert.equal(store.treeSnapshot().page.truncated, false);
  assert.deepEqual(store.treeSnapshot().entries.map((e) => e.id), ALL.map((e) => e.id));
  assert.equal(await store.loadOlder(fetchFrom(calls), 2), 0); // nothing more to ask for
  assert.equal(calls.length, 2);
  // What the server sent is untouched: the store's snapshot still equals it.
  assert.deepEqual(store.snapshot, truncatedSnapshot());
});

test("a page that does not come back whole is an error and changes nothing", async () => {
  const store = storeWith(truncatedSnapshot());
  await assert.rejects(store.loadOlder(async () => ALL.slice(0, 1), 3), /did not come back whole/);
  assert.equal(store.older.below, 3);
  assert.equal(store.older.entries.length, 0);
  assert.match(store.older.error, /whole/);
  assert.equal(store.treeSnapshot(), store.snapshot);
});

test("a new snapshot forgets the pages, and a page that lands after it is dropped", async () => {
  const store = storeWith(truncatedSnapshot());
  let release;
  const pending = store.loadOlder((cursor, limit) => new Promise((resolve) => { release = () => resolve(ALL.slice(cursor, cursor + limit)); }));
  assert.equal(store.older.loading, true);
  store.setSnapshot(truncatedSnapshot());
  release();
  assert.equal(await pending, 0);
  assert.equal(store.older.entries.length, 0);
  assert.equal(store.older.loading, false);
});

test("a truncated active path is extended towards the root through loaded entries", () => {
  const snap = truncatedSnapshot();
  snap.activePath = ["u2", "a2"];
  snap.page = { ...snap.page, activePathTruncated: true };
  const byId = new Map(ALL.map((e) => [e.id, e]));
  const view = withOlder(snap, { entries: [ALL[2]], pathOnly: 2, below: 2 }, (id) => byId.get(id));
  assert.deepEqual(view.activePath, ["u0", "a0", "u1", "a1", "u2", "a2"]);
  assert.equal(withOlder(snap, { entries: [], pathOnly: 2, below: 3 }, (id) => byId.get(id)), snap);
});
