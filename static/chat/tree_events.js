// Tree events applied to snapshots: the browser twin of sessions_tree/events.py.
//
// `applyEvent(snapshot, event)` must compute exactly what the Python `apply_event`
// computes; tests/fixtures/store/*.json (generated from real provider operations)
// are checked by both the node tests and pytest. Pure: inputs are never modified,
// unchanged parts of the snapshot are shared with the result.

export const ENTRY_ADDED = "session_entry_added";
export const ENTRY_UPDATED = "session_entry_updated";
export const LEAF_CHANGED = "session_leaf_changed";
export const SESSION_UPDATED = "session_updated";
export const BRANCH_SUMMARY_ADDED = "session_branch_summary_added";
export const COMPACTION_ADDED = "session_compaction_added";
export const TREE_EVENT_TYPES = new Set([
  ENTRY_ADDED,
  ENTRY_UPDATED,
  LEAF_CHANGED,
  BRANCH_SUMMARY_ADDED,
  COMPACTION_ADDED,
  SESSION_UPDATED,
]);

// The fields each tree event carries: the twin of sessions_tree/tree_events.py
// (tests/chat/test_stream_types.py holds the two equal). `context` (the session's context
// stats after the change) comes with every committed event.
const TREE_COMMON = ["type", "sessionId", "revision"];
export const TREE_EVENT_FIELDS = {
  [ENTRY_ADDED]: { required: [...TREE_COMMON, "entry", "leafId"], optional: ["context", "inFlight", "recovered"] },
  [ENTRY_UPDATED]: { required: [...TREE_COMMON, "entry", "inFlight"], optional: ["context", "recovered"] },
  [LEAF_CHANGED]: { required: [...TREE_COMMON, "leafId", "previousLeafId"], optional: ["context"] },
  [BRANCH_SUMMARY_ADDED]: { required: [...TREE_COMMON, "entry", "leafId"], optional: ["context", "recovered"] },
  [COMPACTION_ADDED]: { required: [...TREE_COMMON, "entry", "leafId"], optional: ["context", "recovered"] },
  [SESSION_UPDATED]: { required: [...TREE_COMMON, "session"], optional: ["context"] },
};

export const ROOT_KEY = "root"; // childrenByParentId key for entries whose parentId is null

export class RevisionGap extends Error {
  constructor(have, got) {
    super(`revision gap: snapshot at ${have}, event at ${got}`);
    this.name = "RevisionGap";
    this.have = have;
    this.got = got;
  }
}

/**
 * The snapshot after `event`. Events at or below the snapshot's revision are
 * ignored (the same object comes back); a gap throws `RevisionGap`.
 * `byId` (optional) is a Map of the snapshot's entries by id, used instead of
 * rebuilding one when the leaf moves somewhere the path must be walked.
 */
export function applyEvent(snapshot, event, byId = null) {
  const revision = event.revision;
  if (revision <= snapshot.revision) return snapshot;
  if (revision !== snapshot.revision + 1) throw new RevisionGap(snapshot.revision, revision);
  const snap = { ...snapshot };
  const kind = event.type;
  if (kind === ENTRY_ADDED || kind === BRANCH_SUMMARY_ADDED || kind === COMPACTION_ADDED) {
    const entry = event.entry;
    if (event.inFlight) snap.inFlight = entry;
    else addEntry(snap, entry);
    setLeaf(snap, event.leafId ?? null, entry, byId);
  } else if (kind === ENTRY_UPDATED) {
    const entry = event.entry;
    if (event.inFlight) {
      snap.inFlight = entry;
    } else {
      snap.inFlight = null;
      addEntry(snap, entry);
    }
  } else if (kind === LEAF_CHANGED) {
    setLeaf(snap, event.leafId ?? null, null, byId);
  } else if (kind === SESSION_UPDATED) {
    snap.session = { ...snap.session, ...event.session };
  } else {
    throw new Error(`unknown tree event type ${JSON.stringify(kind)}`);
  }
  if ("context" in event) snap.runtimeContext = { ...(snap.runtimeContext ?? {}), ...event.context };
  snap.revision = revision;
  return snap;
}

export function applyEvents(snapshot, events) {
  for (const event of events) snapshot = applyEvent(snapshot, event);
  return snapshot;
}

export function parentKey(entry) {
  return typeof entry.parentId === "string" ? entry.parentId : ROOT_KEY;
}

function addEntry(snap, entry) {
  snap.entries = [...snap.entries, entry];
  snap.page = { ...snap.page, totalEntries: snap.page.totalEntries + 1, includedEntries: snap.page.includedEntries + 1 };
  const key = parentKey(entry);
  const siblings = snap.childrenByParentId[key] ?? [];
  if (!siblings.includes(entry.id)) snap.childrenByParentId = { ...snap.childrenByParentId, [key]: [...siblings, entry.id] };
  else snap.childrenByParentId = { ...snap.childrenByParentId };
  if (entry.type === "label") {
    const labels = { ...snap.labelsByEntryId };
    if (pyTruthy(entry.label)) labels[entry.targetId] = entry.label;
    else delete labels[entry.targetId];
    snap.labelsByEntryId = labels;
  } else if (entry.type === "session_info") {
    const name = entry.name;
    snap.session = { ...snap.session, title: typeof name === "string" ? pyStrip(name) : "" };
  }
}

function setLeaf(snap, leafId, appended, byId) {
  const oldPath = snap.activePath;
  let path;
  let truncated;
  if (leafId === null) {
    path = [];
    truncated = false;
  } else if (
    appended !== null &&
    appended.id === leafId &&
    ((appended.parentId == null && oldPath.length === 0) ||
      (oldPath.length > 0 && oldPath[oldPath.length - 1] === appended.parentId))
  ) {
    path = [...oldPath, leafId];
    truncated = snap.page.activePathTruncated ?? false;
  } else {
    [path, truncated] = walkSnapshot(snap, leafId, byId, appended);
  }
  snap.activePath = path;
  const page = { ...snap.page };
  if (leafId === null) page.activePathLength = 0;
  else if (path.length && path[path.length - 1] === leafId && path.length === oldPath.length + 1 && prefixEquals(path, oldPath)) {
    page.activePathLength = (page.activePathLength ?? oldPath.length) + 1;
  } else {
    page.activePathLength = path.length;
  }
  page.activePathTruncated = truncated;
  snap.page = page;
  snap.session = { ...snap.session, leafEntryId: leafId };
  snap.leafId = leafId;
}

function prefixEquals(path, prefix) {
  for (let i = 0; i < prefix.length; i++) if (path[i] !== prefix[i]) return false;
  return true;
}

function walkSnapshot(snap, leafId, byId, appended) {
  let lookup = byId;
  if (lookup === null) {
    lookup = new Map();
    for (const e of snap.entries) lookup.set(e.id, e);
  }
  const inFlight = snap.inFlight;
  const get = (id) => {
    if (inFlight != null && inFlight.id === id) return inFlight;
    if (appended !== null && appended.id === id && byId !== null) return appended; // not in byId yet
    return lookup.get(id);
  };
  const path = [];
  const seen = new Set();
  let cursor = leafId;
  while (cursor !== null) {
    const entry = get(cursor);
    if (entry === undefined || seen.has(cursor)) {
      // Outside the snapshot's window: the client pages it in when needed.
      return [path.reverse(), snap.page.truncated ?? false];
    }
    seen.add(cursor);
    path.push(cursor);
    const parent = entry.parentId;
    cursor = typeof parent === "string" && parent !== cursor ? parent : null;
  }
  return [path.reverse(), false];
}

// Python truthiness for the JSON values a label can hold.
function pyTruthy(value) {
  if (value === null || value === undefined || value === false || value === 0 || value === "") return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "object") return Object.keys(value).length > 0;
  return true;
}

// str.strip(): Python's whitespace, which differs from JS trim() (no U+FEFF; adds U+001C..U+001F, U+0085).
const PY_SPACE = "\\t\\n\\v\\f\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");
export function pyStrip(text) {
  return text.replace(STRIP, "");
}
