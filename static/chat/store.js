// The chat page's session store: snapshot + patches, streaming state, run and connection state.
//
// No DOM, no socket: the connection feeds server frames to `receive(frame)` and
// sends whatever frames the store asks for (`this.outbox`, drained by the
// connection). The protocol (docs/realtime.md, docs/chat.md): subscribe first, snapshot
// second; tree events apply strictly in revision order; a gap asks the server for
// `subscribe{sinceRevision}` (filled from the event log); `resync_needed` (the log
// no longer reaches back) asks for a fresh snapshot.
//
// Listeners get the set of parts that changed: "tree" (entries/children/labels),
// "leaf" (active path), "live" (the streaming message), "run", "context",
// "connection", "session".

import { applyEvent, RevisionGap, ROOT_KEY, TREE_EVENT_TYPES } from "./tree_events.js";
import { withOlder } from "./tree_model.js";
import { createLive, liveApplyCheckpoint, liveApplyStream } from "./streaming.js";
import { applySubagentReplay, applySubagentStream, heldBatches } from "./subagents.js";

// The streaming events this store reads and the fields each carries: the browser twin of
// runtime/realtime/stream_events.py (tests/chat/test_stream_types.py holds the two equal,
// and holds every `event.<field>` this page reads to a declared field). `omitted` (fields
// the channel layer left out, too large) may come with any of them.
const ANY_STREAM = { optional: ["omitted"] };
export const STREAM_EVENT_FIELDS = {
  assistant_stream_start: { required: ["type", "entryId", "runId"], ...ANY_STREAM },
  assistant_stream_delta: { required: ["type", "entryId", "contentIndex", "kind", "offset", "delta"], ...ANY_STREAM },
  assistant_stream_end: { required: ["type", "entryId", "stopReason", "runId"], ...ANY_STREAM },
  tool_call_started: { required: ["type", "entryId", "contentIndex", "toolCallId", "name"], ...ANY_STREAM },
  tool_call_delta: { required: ["type", "entryId", "contentIndex", "delta"], ...ANY_STREAM },
  tool_call_completed: { required: ["type", "entryId", "contentIndex", "toolCall"], ...ANY_STREAM },
  tool_result_streamed: { required: ["type", "toolCallId", "text"], optional: ["omitted", "truncated", "final", "isError"] },
  session_context_stats: { required: ["type", "tokens", "contextWindow", "model"], ...ANY_STREAM },
  run_state: { required: ["type", "runId", "state", "error"], ...ANY_STREAM },
  // What the run did on its own (a model failover, a thinking level clamped): shown beside its state.
  run_note: { required: ["type", "runId", "kind", "text"], ...ANY_STREAM },
  // Subagents (docs/subagents.md): sent by the subagent host; kept in `store.subagents` (subagents.js).
  subagent_run_started: { required: ["type", "runId", "subagentRunId", "batchId", "batchEntryId", "toolCallId", "taskIndex", "agent", "depth", "pid"], ...ANY_STREAM },
  subagent_event: { required: ["type", "runId", "subagentRunId", "batchId", "taskIndex", "firstSeq", "seq", "event"], ...ANY_STREAM },
  subagent_run_completed: { required: ["type", "runId", "subagentRunId", "batchId", "taskIndex", "agent", "status", "errorCode", "error", "usage", "eventCount"], ...ANY_STREAM },
};
export const STREAM_EVENT_TYPES = new Set(Object.keys(STREAM_EVENT_FIELDS));

const ACTIVE_RUN_STATES = new Set(["queued", "running", "waiting"]);
const MAX_TOOL_OUTPUTS = 200;
const MAX_RUN_STATES = 50;
const MAX_RUN_NOTES = 20;

export class SessionStore {
  constructor({ sessionId = null } = {}) {
    this.sessionId = sessionId;
    this.snapshot = null; // exactly what the server's snapshot + events give (compared in tests)
    this.byId = new Map(); // entries of the snapshot (and the in-flight one) by id
    this.older = emptyOlder(null); // entries older than a truncated snapshot's window, paged in on demand
    this.live = null; // the streaming assistant message, see streaming.js
    this.toolOutputs = new Map(); // toolCallId -> {text, final, isError, truncated}
    this.subagents = new Map(); // subagentRunId -> a child's stream (subagents.js), live or replayed
    this.run = { runId: null, state: "idle", error: null };
    this.runNotes = { runId: null, notes: [] }; // the notes of one run (run_note events, or the REST runs list)
    this._runStates = new Map(); // runId -> the last state the socket told (newer than any other source)
    this.stats = null; // last session_context_stats
    this.connection = { state: "connecting", attempt: 0, lastError: null, since: Date.now() };
    this.readOnly = false;
    this.commands = [];
    this.phase = "idle"; // idle | snapshot (waiting for one) | replay (waiting for the log) | live
    this.buffer = []; // tree events that came before the snapshot they follow
    this.outbox = [];
    this.counters = { gaps: 0, resyncs: 0, snapshots: 0, replayed: 0, ignored: 0 };
    this._listeners = new Set();
    this._requestSeq = 0;
    this._pending = new Map(); // requestId -> {resolve, reject, command}
  }

  // ---------------------------------------------------------------- listeners

  subscribe(listener) {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  _notify(changes) {
    if (changes.size === 0) return;
    this.changeCount = (this.changeCount ?? 0) + 1;
    for (const listener of [...this._listeners]) listener(changes, this);
  }

  // ---------------------------------------------------------------- connection lifecycle

  /** The socket opened: with a snapshot, ask for what happened since; without, fetch one first. */
  connected() {
    this.connection = { ...this.connection, state: "syncing", lastError: null, since: Date.now() };
    if (this.snapshot) this._subscribe(this.snapshot.revision);
    else this._fetchSnapshot();
    this._notify(new Set(["connection"]));
  }

  /** The socket closed; `retryInMs` is when the connection will try again (null: never). */
  disconnected({ reason = null, retryInMs = null, attempt = 0 } = {}) {
    this.phase = "idle";
    this.buffer = [];
    this.outbox = []; // unsent commands are rejected below; subscribe is sent again on connect
    for (const [, pending] of this._pending) pending.reject(new CommandError("disconnected", "the connection was lost"));
    this._pending.clear();
    const state = retryInMs === null ? "offline" : "reconnecting";
    this.connection = { state, attempt, lastError: reason, retryAt: retryInMs === null ? null : Date.now() + retryInMs, since: Date.now() };
    this._notify(new Set(["connection"]));
  }

  _subscribe(sinceRevision) {
    this.phase = "replay";
    this.outbox.push({ type: "subscribe", sinceRevision, requestId: this._nextRequestId() });
  }

  /**
   * A fresh snapshot comes through the REST API (a socket frame is capped at 1 MiB;
   * a large session's snapshot is not). The connection sees `fetch_snapshot` in the
   * outbox, fetches it and hands it to `snapshotFetched`; the store then subscribes
   * from its revision, so the event log replays whatever happened meanwhile.
   */
  _fetchSnapshot() {
    this.phase = "snapshot";
    this.counters.snapshots += 1;
    this.outbox.push({ type: "fetch_snapshot" });
  }

  snapshotFetched(snapshot) {
    const changes = new Set();
    this.buffer = this.buffer.filter((e) => e.revision > snapshot.revision);
    this._snapshot(snapshot, changes);
    this._subscribe(snapshot.revision);
    this._notify(changes);
  }

  _nextRequestId() {
    this._requestSeq += 1;
    return `c${this._requestSeq}`;
  }

  takeOutbox() {
    const frames = this.outbox;
    this.outbox = [];
    return frames;
  }

  // ---------------------------------------------------------------- commands

  /** Queue a command frame; resolves with the server's ack result, rejects with CommandError. */
  command(type, fields = {}) {
    const requestId = this._nextRequestId();
    this.outbox.push({ type, ...fields, requestId });
    return new Promise((resolve, reject) => this._pending.set(requestId, { resolve, reject, command: type }));
  }

  // ---------------------------------------------------------------- server frames

  receive(frame) {
    const changes = new Set();
    const type = frame.type;
    if (TREE_EVENT_TYPES.has(type)) this._treeEvent(frame, changes);
    else if (STREAM_EVENT_TYPES.has(type)) this._streamEvent(frame, changes);
    else if (type === "snapshot") this._snapshot(frame.snapshot, changes);
    else if (type === "subscribed") this._subscribed(frame, changes);
    else if (type === "hello") {
      this.readOnly = Boolean(frame.readOnly);
      this.commands = frame.commands ?? [];
      changes.add("connection");
    } else if (type === "ack") this._settle(frame.requestId, (p) => p.resolve(frame.result));
    else if (type === "error") this._error(frame, changes);
    else if (type === "heartbeat") {
      if (this.phase === "live" && this.snapshot && typeof frame.revision === "number" && frame.revision > this.snapshot.revision) {
        this._gap(changes); // the server is ahead of us: a doorbell message was lost
      }
    }
    // pong and unknown frames change nothing
    this._notify(changes);
  }

  _settle(requestId, fn) {
    const pending = this._pending.get(requestId);
    if (pending) {
      this._pending.delete(requestId);
      fn(pending);
    }
  }

  _error(frame, changes) {
    if (frame.code === "resync_needed") {
      // The event log no longer reaches back to our revision: start over from a snapshot.
      this.counters.resyncs += 1;
      this.buffer = [];
      this._fetchSnapshot();
      this.connection = { ...this.connection, state: "syncing" };
      changes.add("connection");
    }
    if (frame.requestId != null && this._pending.has(frame.requestId)) {
      this._settle(frame.requestId, (p) => p.reject(new CommandError(frame.code, frame.message, frame.fields)));
    } else if (frame.code !== "resync_needed") {
      this.connection = { ...this.connection, lastError: `${frame.code}: ${frame.message}` };
      changes.add("connection");
    }
  }

  _snapshot(snapshot, changes) {
    this.setSnapshot(snapshot, changes);
    // Events that came before the snapshot: drop what it already shows, apply the rest.
    const buffered = this.buffer;
    this.buffer = [];
    this.phase = "live";
    for (const event of buffered) this._apply(event, changes);
  }

  /** The socket says the server has moved on: the log fills the gap. */

  /** Replace the snapshot (first load, resync, or a test). */
  setSnapshot(snapshot, changes = new Set()) {
    this.snapshot = snapshot;
    this.sessionId = snapshot.session?.sessionId ?? this.sessionId;
    this.byId = new Map();
    for (const entry of snapshot.entries) this.byId.set(entry.id, entry);
    if (snapshot.inFlight) this.byId.set(snapshot.inFlight.id, snapshot.inFlight);
    this.older = emptyOlder(snapshot);
    this._syncLive(changes, { reloaded: true });
    this._forgetFinishedToolOutputs(snapshot.entries);
    changes.add("tree").add("leaf").add("context").add("session");
    return changes;
  }

  _subscribed(frame, changes) {
    this.counters.replayed += frame.replayed ?? 0;
    if (this.phase === "replay" || this.phase === "snapshot") {
      const buffered = this.buffer;
      this.buffer = [];
      this.phase = this.snapshot ? "live" : "snapshot";
      for (const event of buffered) this._apply(event, changes);
    }
    this.connection = { state: "live", attempt: 0, lastError: null, since: Date.now() };
    changes.add("connection");
  }

  _treeEvent(event, changes) {
    if (this.snapshot === null || this.phase === "snapshot") {
      this.buffer.push(event);
      return;
    }
    this._apply(event, changes);
  }

  _apply(event, changes) {
    let next;
    try {
      next = applyEvent(this.snapshot, event, this.byId);
    } catch (error) {
      if (!(error instanceof RevisionGap)) throw error;
      // Already asking the log for what is missing: the replay brings this one again.
      if (this.phase === "replay") this.counters.ignored += 1;
      else this._gap(changes);
      return;
    }
    if (next === this.snapshot) {
      this.counters.ignored += 1;
      return;
    }
    const before = this.snapshot;
    this.snapshot = next;
    if (event.entry) this.byId.set(event.entry.id, event.entry);
    if (next.entries !== before.entries) {
      changes.add("tree");
      const added = event.entry;
      if (added?.type === "message" && added.message?.role === "toolResult") this.toolOutputs.delete(added.message.toolCallId);
      if (added?.type === "session_info") changes.add("session");
    }
    if (next.activePath !== before.activePath || next.leafId !== before.leafId) changes.add("leaf");
    if (next.labelsByEntryId !== before.labelsByEntryId) changes.add("tree");
    if (next.runtimeContext !== before.runtimeContext) changes.add("context");
    if (this.stats && next.leafId !== before.leafId) {
      // The last run's figure describes the context it saw; after a compaction, a branch
      // summary or a move elsewhere the server's estimate for the new leaf is the one.
      const leaf = this.byId.get(next.leafId);
      if (leaf?.type === "compaction" || leaf?.type === "branch_summary" || (leaf && leaf.parentId !== before.leafId)) {
        this.stats = null;
        changes.add("context");
      }
    }
    if (next.inFlight !== before.inFlight) this._syncLive(changes, { reloaded: false });
    if (next.leafId !== null && next.activePath[next.activePath.length - 1] !== next.leafId && this.phase === "live") {
      // The leaf moved outside the entries this snapshot holds: take a fresh one.
      this.counters.windowMisses = (this.counters.windowMisses ?? 0) + 1;
      this._fetchSnapshot();
    }
  }

  _gap(changes) {
    // Ask the server for everything after our revision; it answers from the event log
    // (or with resync_needed). Events arriving meanwhile are dropped: the replay has them.
    this.counters.gaps += 1;
    this.phase = "replay";
    this.outbox.push({ type: "subscribe", sinceRevision: this.snapshot.revision, requestId: this._nextRequestId() });
    this.connection = { ...this.connection, state: "syncing" };
    changes.add("connection");
  }

  // ---------------------------------------------------------------- streaming

  _syncLive(changes, { reloaded }) {
    // Only an assistant message streams; an in-flight subagent_batch (children running) is
    // shown by the run's busy state, not as an empty reply.
    const pending = this.snapshot?.inFlight ?? null;
    const inFlight = pending !== null && pending.type === "message" ? pending : null;
    if (pending !== null && inFlight === null) changes.add("live"); // a batch's checkpoint: its panel redraws
    if (inFlight === null) {
      if (this.live !== null) {
        this.live = null;
        changes.add("live");
      }
      return;
    }
    if (this.live === null || this.live.entryId !== inFlight.id) {
      this.live = createLive(inFlight, { reloaded });
    } else {
      this.live = liveApplyCheckpoint(this.live, inFlight);
    }
    changes.add("live");
  }

  _streamEvent(event, changes) {
    const type = event.type;
    if (type === "run_state") {
      // The server sends the run's state after every `subscribed` and again on a heartbeat
      // when this socket's last one is stale (docs/realtime.md): the latest frame wins.
      this.run = { runId: event.runId ?? null, state: event.state, error: event.error ?? null };
      if (event.runId) {
        this._runStates.delete(event.runId);
        this._runStates.set(event.runId, event.state);
        if (this._runStates.size > MAX_RUN_STATES) this._runStates.delete(this._runStates.keys().next().value);
      }
      changes.add("run");
      return;
    }
    if (type === "run_note") {
      const same = this.runNotes.runId === event.runId;
      const notes = [...(same ? this.runNotes.notes : []), { kind: event.kind, text: event.text }].slice(-MAX_RUN_NOTES);
      this.runNotes = { runId: event.runId, notes };
      changes.add("run");
      return;
    }
    if (type === "session_context_stats") {
      this.stats = { ...event };
      changes.add("context");
      return;
    }
    if (type === "tool_result_streamed") {
      const previous = this.toolOutputs.get(event.toolCallId);
      this.toolOutputs.set(event.toolCallId, {
        text: event.text ?? previous?.text ?? "",
        final: Boolean(event.final),
        isError: Boolean(event.isError),
        truncated: Boolean(event.truncated),
      });
      if (this.toolOutputs.size > MAX_TOOL_OUTPUTS) this.toolOutputs.delete(this.toolOutputs.keys().next().value);
      changes.add("tools");
      return;
    }
    if (type.startsWith("subagent_")) {
      const next = applySubagentStream(this.subagents, event);
      if (next !== this.subagents) {
        this.subagents = next;
        changes.add("subagents");
      }
      return;
    }
    if (type === "assistant_stream_start" && !ACTIVE_RUN_STATES.has(this.run.state)) {
      this.run = { runId: event.runId ?? this.run.runId, state: "running", error: null };
      changes.add("run");
    }
    const next = liveApplyStream(this.live, event);
    if (next !== this.live) {
      this.live = next;
      changes.add("live");
    }
  }

  _forgetFinishedToolOutputs(entries) {
    if (this.toolOutputs.size === 0) return;
    for (const entry of entries) {
      if (entry.type === "message" && entry.message?.role === "toolResult") this.toolOutputs.delete(entry.message.toolCallId);
    }
  }

  /** A child's events from the replay endpoint (rows {seq, type, payload}); notifies "subagents". */
  subagentReplayed(runId, rows, fields = {}) {
    const next = applySubagentReplay(this.subagents, runId, rows, fields);
    if (next === this.subagents) return;
    this.subagents = next;
    this._notify(new Set(["subagents"]));
  }

  /** Batches known only from live events so far (their entry has not arrived): batchId → children. */
  heldBatches() {
    if (this.subagents.size === 0) return new Map();
    const snapshot = this.snapshot;
    if (this._batchIds?.entries !== snapshot?.entries || this._batchIds?.inFlight !== snapshot?.inFlight) {
      const ids = new Set();
      for (const entry of [...(snapshot?.entries ?? []), snapshot?.inFlight]) if (entry?.type === "subagent_batch") ids.add(entry.batchId);
      this._batchIds = { entries: snapshot?.entries, inFlight: snapshot?.inFlight, ids };
    }
    const ids = this._batchIds.ids;
    return heldBatches(this.subagents, (batchId, entryId) => ids.has(batchId) || (entryId !== null && this.byId.has(entryId)));
  }

  // ---------------------------------------------------------------- reads

  entry(id) {
    return this.byId.get(id) ?? this.older.byId.get(id);
  }

  /**
   * Page in the entries just older than what is loaded (`pageSize` positions),
   * through `fetchPage(cursor, limit)` → entries in stored order from position
   * `cursor` (the REST entries endpoint). Positions never move: sessions only grow
   * at their end. Resolves to the number of entries added; notifies "tree".
   */
  async loadOlder(fetchPage, pageSize = 500) {
    const older = this.older;
    if (older.loading || older.below <= 0) return 0;
    const start = Math.max(0, older.below - pageSize);
    this.older = { ...older, loading: true, error: null };
    this._notify(new Set(["tree"]));
    try {
      const page = await fetchPage(start, older.below - start);
      if (this.older.snapshot !== older.snapshot) return 0; // a new snapshot came meanwhile
      if (!Array.isArray(page) || page.length !== older.below - start) throw new Error("the session's older entries did not come back whole");
      const byId = new Map(older.byId);
      for (const entry of page) byId.set(entry.id, entry);
      this.older = { ...older, entries: [...page, ...older.entries], below: start, byId, loading: false, error: null };
      this._notify(new Set(["tree"]));
      return page.length;
    } catch (error) {
      if (this.older.snapshot === older.snapshot) this.older = { ...older, loading: false, error: error.message ?? String(error) };
      this._notify(new Set(["tree"]));
      throw error;
    }
  }

  /** The snapshot with the older entries loaded so far (what the tree shows). */
  treeSnapshot() {
    const { snapshot, older } = this;
    if (older.entries.length === 0) return snapshot;
    if (older.view?.entries !== snapshot.entries || older.view?.older !== older.entries || older.view?.snapshot !== snapshot) {
      older.view = { snapshot, entries: snapshot.entries, older: older.entries, merged: withOlder(snapshot, older, (id) => this.entry(id)) };
    }
    return older.view.merged;
  }

  children(id) {
    return this.snapshot?.childrenByParentId[id ?? ROOT_KEY] ?? [];
  }

  get running() {
    return ACTIVE_RUN_STATES.has(this.run.state) || Boolean(this.snapshot?.inFlight);
  }

  /**
   * Run state known from outside the socket (a prompt's ack, the REST runs list after
   * a reconnect). Runs only move forward (queued → running → an end): an answer that
   * is behind what the socket said about the same run (a late ack) changes nothing.
   */
  setRun(run, changes = new Set()) {
    if (run?.runId && Array.isArray(run.notes) && run.notes.length && this.runNotes.runId !== run.runId) {
      // The REST runs list's notes after a reload (the socket's run_note events went by).
      this.runNotes = { runId: run.runId, notes: run.notes.map((n) => ({ kind: n.kind, text: n.text })).slice(-MAX_RUN_NOTES) };
      changes.add("run");
    }
    const told = run?.runId ? this._runStates.get(run.runId) : undefined;
    if (told !== undefined && runRank(run.state) <= runRank(told)) return;
    this.run = { runId: run?.runId ?? null, state: run?.state ?? "idle", error: run?.error ?? null };
    changes.add("run");
    this._notify(changes);
  }
}

export class CommandError extends Error {
  constructor(code, message, fields = null) {
    super(message);
    this.name = "CommandError";
    this.code = code;
    this.fields = fields;
  }
}

function runRank(state) {
  return state === "queued" ? 0 : state === "running" || state === "waiting" ? 1 : 2;
}

/** Nothing older loaded yet: `below` is the position where the snapshot's window starts. */
function emptyOlder(snapshot) {
  const page = snapshot?.page;
  const truncated = Boolean(page?.truncated);
  return {
    snapshot,
    entries: [],
    byId: new Map(),
    below: truncated ? Math.max(0, page.totalEntries - page.limit) : 0,
    pathOnly: truncated ? Math.max(0, page.includedEntries - page.limit) : 0,
    loading: false,
    error: null,
    view: null,
  };
}
