// The shared fixtures (tests/fixtures/store, made by real provider operations and
// checked by pytest too): the browser store computes the same snapshots as Python.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { SessionStore } from "../../static/chat/store.js";
import { applyEvent, RevisionGap } from "../../static/chat/tree_events.js";
import { checkFixture } from "./fixture_check.mjs";

const DIR = fileURLToPath(new URL("../fixtures/store/", import.meta.url));
const fixtures = readdirSync(DIR)
  .filter((n) => n.endsWith(".json"))
  .sort()
  .map((n) => JSON.parse(readFileSync(join(DIR, n), "utf8")));

test("there are fixtures for every tree event type", () => {
  const types = new Set(fixtures.flatMap((f) => f.events.map((e) => e.type)));
  assert.deepEqual([...types].sort(), [
    "session_branch_summary_added",
    "session_compaction_added",
    "session_entry_added",
    "session_entry_updated",
    "session_leaf_changed",
    "session_updated",
  ]);
});

for (const fixture of fixtures) {
  test(`fixture ${fixture.name}: apply(before, events) == after`, () => {
    assert.equal(checkFixture(fixture), null);
  });
}

test("old events are ignored and a skipped event is a gap", () => {
  const fixture = fixtures.find((f) => f.events.length > 1);
  const [first, second] = fixture.events;
  const after = applyEvent(fixture.before, first);
  assert.equal(applyEvent(after, first), after); // already applied: same object
  assert.throws(() => applyEvent(fixture.before, second), RevisionGap);
});

test("the store fills a gap from the log: it asks for sinceRevision and applies the replay", () => {
  const fixture = fixtures.find((f) => f.events.length >= 3);
  const store = new SessionStore();
  store.connected();
  assert.deepEqual(store.takeOutbox(), [{ type: "fetch_snapshot" }]); // large snapshots come through REST
  store.snapshotFetched(structuredClone(fixture.before));
  const [subscribe] = store.takeOutbox(); // then the socket, from the snapshot's revision
  assert.deepEqual({ ...subscribe, requestId: undefined }, { type: "subscribe", sinceRevision: fixture.before.revision, requestId: undefined });
  store.receive({ type: "subscribed", revision: fixture.before.revision, replayed: 0 });
  assert.equal(store.connection.state, "live");
  const [e1, e2, ...rest] = fixture.events;
  store.receive(structuredClone(e2)); // e1 was lost by the doorbell
  const [ask] = store.takeOutbox();
  assert.equal(ask.type, "subscribe");
  assert.equal(ask.sinceRevision, fixture.before.revision);
  assert.equal(store.counters.gaps, 1);
  assert.equal(store.connection.state, "syncing");
  store.receive(structuredClone(rest[0] ?? e2)); // a live event during the replay: not a second request
  assert.equal(store.takeOutbox().length, 0);
  for (const event of fixture.events) store.receive(structuredClone(event)); // the replay
  store.receive({ type: "subscribed", revision: fixture.after.revision, replayed: fixture.events.length });
  assert.deepEqual(store.snapshot, fixture.after);
  assert.equal(store.connection.state, "live");
});

test("resync_needed leads to a fresh snapshot; events before it are buffered and filtered", () => {
  const fixture = fixtures.find((f) => f.events.length >= 3);
  const store = new SessionStore();
  store.connected();
  store.takeOutbox();
  store.receive({ type: "snapshot", snapshot: structuredClone(fixture.before) });
  store.receive({ type: "subscribed", revision: fixture.before.revision, replayed: 0 });
  store.receive(structuredClone(fixture.events[1]));
  store.takeOutbox();
  store.receive({ type: "error", code: "resync_needed", message: "the log no longer reaches back" });
  assert.deepEqual(store.takeOutbox(), [{ type: "fetch_snapshot" }]);
  assert.equal(store.counters.resyncs, 1);
  // Events that come before the fresh snapshot wait; those it already shows are dropped.
  for (const event of fixture.events) store.receive(structuredClone(event));
  const middle = applyEvent(fixture.before, fixture.events[0]);
  store.snapshotFetched(structuredClone(middle));
  assert.deepEqual(store.snapshot, fixture.after);
  assert.deepEqual(store.takeOutbox().map((f) => [f.type, f.sinceRevision]), [["subscribe", middle.revision]]);
});

test("a heartbeat ahead of the store is a gap too", () => {
  const fixture = fixtures[0];
  const store = new SessionStore();
  store.receive({ type: "snapshot", snapshot: structuredClone(fixture.before) });
  store.receive({ type: "heartbeat", revision: fixture.before.revision });
  assert.equal(store.takeOutbox().length, 0);
  store.receive({ type: "heartbeat", revision: fixture.before.revision + 2 });
  assert.deepEqual(store.takeOutbox().map((f) => [f.type, f.sinceRevision]), [["subscribe", fixture.before.revision]]);
});

test("listeners hear which parts changed", () => {
  const fixture = fixtures.find((f) => f.name.includes("label-set"));
  const store = new SessionStore();
  store.receive({ type: "snapshot", snapshot: structuredClone(fixture.before) });
  const heard = [];
  store.subscribe((changes) => heard.push([...changes].sort()));
  for (const event of fixture.events) store.receive(structuredClone(event));
  assert.deepEqual(heard, [["context", "leaf", "tree"]]);
});
