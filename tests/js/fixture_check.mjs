// One fixture, checked the ways the browser uses the store: the pure function, and
// the SessionStore fed the events as socket frames. Returns null or what differs.
import { isDeepStrictEqual } from "node:util";
import { applyEvents } from "../../static/chat/tree_events.js";
import { SessionStore } from "../../static/chat/store.js";

export function checkFixture({ before, events, after }) {
  const frozen = structuredClone(before);
  const pure = applyEvents(before, events);
  if (!isDeepStrictEqual(pure, after)) return `applyEvents differs: ${firstDifference(pure, after)}`;
  if (!isDeepStrictEqual(before, frozen)) return "applyEvents modified its input";
  const store = new SessionStore();
  store.receive({ type: "snapshot", snapshot: structuredClone(before) });
  for (const event of events) store.receive(structuredClone(event));
  if (!isDeepStrictEqual(store.snapshot, after)) return `SessionStore differs: ${firstDifference(store.snapshot, after)}`;
  // A leaf outside the snapshot's window makes the store ask for a fresh snapshot; nothing else may.
  const windowMiss = after.leafId !== null && after.activePath[after.activePath.length - 1] !== after.leafId;
  const asked = store.outbox.map((f) => `${f.type}:${f.sinceRevision}`);
  const expected = windowMiss ? ["fetch_snapshot:undefined"] : [];
  if (JSON.stringify(asked) !== JSON.stringify(expected)) return `SessionStore asked for ${JSON.stringify(asked)}, expected ${JSON.stringify(expected)}`;
  return null;
}

export function firstDifference(a, b, path = "$") {
  if (isDeepStrictEqual(a, b)) return null;
  if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) {
      const found = firstDifference(a[key], b[key], `${path}.${key}`);
      if (found) return found;
    }
  }
  return `${path}: ${JSON.stringify(a)?.slice(0, 200)} != ${JSON.stringify(b)?.slice(0, 200)}`;
}
