// The streaming message: deltas on top of the in-flight entry, checkpoints, reloads.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SessionStore } from "../../static/chat/store.js";
import { createLive, liveApplyCheckpoint, liveApplyStream, liveMessage, tailOverlap } from "../../static/chat/streaming.js";

const inFlight = (id, content) => ({ type: "message", id, parentId: "p1", timestamp: "t", message: { role: "assistant", content } });
const delta = (entryId, contentIndex, text, kind = "text") => ({ type: "assistant_stream_delta", entryId, contentIndex, kind, delta: text });

function feed(live, events) {
  for (const event of events) live = liveApplyStream(live, event);
  return live;
}

test("deltas build text and thinking blocks by content index", () => {
  let live = liveApplyStream(null, { type: "assistant_stream_start", entryId: "e1", runId: "r1" });
  live = feed(live, [delta("e1", 0, "Let me ", "thinking"), delta("e1", 0, "think", "thinking"), delta("e1", 1, "Hello"), delta("e1", 1, ", world")]);
  assert.deepEqual(liveMessage(live).content, [
    { type: "thinking", thinking: "Let me think" },
    { type: "text", text: "Hello, world" },
  ]);
  assert.equal(live.runId, "r1");
  live = liveApplyStream(live, { type: "assistant_stream_end", entryId: "e1", stopReason: "stop" });
  assert.equal(live.ended, true);
});

test("tool calls stream their arguments and complete with the parsed call", () => {
  let live = createLive(inFlight("e1", []));
  live = feed(live, [
    { type: "tool_call_started", entryId: "e1", contentIndex: 0, toolCallId: "c1", name: "bash" },
    { type: "tool_call_delta", entryId: "e1", contentIndex: 0, delta: '{"command":' },
    { type: "tool_call_delta", entryId: "e1", contentIndex: 0, delta: '"ls"}' },
  ]);
  assert.equal(live.message.content[0].argsText, '{"command":"ls"}');
  live = liveApplyStream(live, { type: "tool_call_completed", entryId: "e1", contentIndex: 0, toolCall: { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } } });
  assert.deepEqual(liveMessage(live).content[0], { type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } });
});

test("a checkpoint ahead of the deltas fills the gap; repeated text is not doubled", () => {
  let live = createLive(inFlight("e1", []));
  live = feed(live, [delta("e1", 0, "The quick ")]);
  // The checkpoint already holds a delta the coalescer had not sent yet.
  live = liveApplyCheckpoint(live, inFlight("e1", [{ type: "text", text: "The quick brown " }]));
  assert.equal(liveMessage(live).content[0].text, "The quick brown ");
  live = feed(live, [delta("e1", 0, "brown fox"), delta("e1", 0, " jumps")]);
  assert.equal(liveMessage(live).content[0].text, "The quick brown fox jumps");
});

test("a checkpoint behind the deltas changes nothing", () => {
  let live = feed(createLive(inFlight("e1", [])), [delta("e1", 0, "abcdef")]);
  const before = live.message.content;
  live = liveApplyCheckpoint(live, inFlight("e1", [{ type: "text", text: "abc" }]));
  assert.equal(live.message.content, before);
});

test("when the deltas a checkpoint showed were lost, later deltas are appended after it", () => {
  let live = feed(createLive(inFlight("e1", [])), [delta("e1", 0, "one ")]);
  live = liveApplyCheckpoint(live, inFlight("e1", [{ type: "text", text: "one two " }]));
  live = feed(live, [delta("e1", 0, "three")]); // "two " never came as a delta
  assert.equal(liveMessage(live).content[0].text, "one two three");
});

test("after a reload the first delta is joined on its overlap with the checkpoint", () => {
  const reloaded = createLive(inFlight("e1", [{ type: "text", text: "Streaming a long answer about" }]), { reloaded: true });
  const joined = feed(reloaded, [delta("e1", 0, "answer about trees"), delta("e1", 0, ".")]);
  assert.equal(liveMessage(joined).content[0].text, "Streaming a long answer about trees.");
  const fresh = feed(reloaded, [delta("e1", 0, " forests")]);
  assert.equal(liveMessage(fresh).content[0].text, "Streaming a long answer about forests");
  assert.equal(tailOverlap("abc the", "the end"), 0); // short overlaps are not trusted
  assert.equal(tailOverlap("abc the", "the"), 3); // a whole delta already shown is
});

test("the store keeps streaming apart from the tree and clears it on finalization", () => {
  const store = new SessionStore();
  const snapshot = {
    session: { sessionId: "s" }, revision: 4, leafId: "p1", entries: [{ type: "message", id: "p1", parentId: null, timestamp: "t", message: { role: "user", content: "hi" } }],
    activePath: ["p1"], childrenByParentId: { root: ["p1"] }, labelsByEntryId: {}, inFlight: null, runtimeContext: {},
    page: { totalEntries: 1, includedEntries: 1, truncated: false, activePathLength: 1, activePathTruncated: false, limit: 2000 },
  };
  store.receive({ type: "snapshot", snapshot });
  const parts = [];
  store.subscribe((changes) => parts.push([...changes].sort().join(",")));
  const entry = inFlight("a1", []);
  store.receive({ type: "session_entry_added", revision: 5, sessionId: "s", entry, leafId: "a1", inFlight: true });
  store.receive({ type: "assistant_stream_start", entryId: "a1", runId: "r" });
  store.receive(delta("a1", 0, "Hi"));
  store.receive(delta("a1", 0, " there"));
  assert.equal(liveMessage(store.live).content[0].text, "Hi there");
  assert.equal(store.snapshot.entries.length, 1); // streaming never touches the tree
  assert.equal(store.running, true);
  const final = { ...entry, message: { ...entry.message, content: [{ type: "text", text: "Hi there!" }], stopReason: "stop" } };
  store.receive({ type: "session_entry_updated", revision: 6, sessionId: "s", entry: final, inFlight: false });
  assert.equal(store.live, null);
  assert.equal(store.snapshot.entries.at(-1), final);
  assert.deepEqual(parts, ["leaf,live", "live,run", "live", "live", "live,tree"]);
  store.receive({ type: "run_state", runId: "r", state: "completed", error: null });
  assert.equal(store.running, false);
});

test("streamed tool output is kept until the tool result entry arrives", () => {
  const store = new SessionStore();
  store.receive({ type: "tool_result_streamed", toolCallId: "c1", text: "line 1\n" });
  store.receive({ type: "tool_result_streamed", toolCallId: "c1", text: "line 1\nline 2\n", final: true, isError: false });
  assert.deepEqual(store.toolOutputs.get("c1"), { text: "line 1\nline 2\n", final: true, isError: false, truncated: false });
  const snapshot = {
    session: { sessionId: "s" }, revision: 1, leafId: null, entries: [], activePath: [], childrenByParentId: {}, labelsByEntryId: {},
    inFlight: null, runtimeContext: {}, page: { totalEntries: 0, includedEntries: 0, truncated: false, activePathLength: 0, activePathTruncated: false },
  };
  store.receive({ type: "snapshot", snapshot });
  const result = { type: "message", id: "t1", parentId: null, timestamp: "t", message: { role: "toolResult", toolCallId: "c1", toolName: "bash", content: [], isError: false } };
  store.receive({ type: "session_entry_added", revision: 2, entry: result, leafId: "t1" });
  assert.equal(store.toolOutputs.has("c1"), false);
});

test("commands resolve with their ack and reject with the server's error", async () => {
  const store = new SessionStore();
  const ok = store.command("prompt", { text: "hi" });
  const bad = store.command("switch_leaf", { entryId: "zz", summarize: false });
  const [f1, f2] = store.takeOutbox();
  assert.equal(f1.type, "prompt");
  assert.equal(f1.text, "hi");
  store.receive({ type: "ack", command: "prompt", requestId: f1.requestId, result: { runId: "r" } });
  store.receive({ type: "error", code: "invalid", message: "entryId: not found", requestId: f2.requestId, fields: { entryId: ["not found"] } });
  assert.deepEqual(await ok, { runId: "r" });
  await assert.rejects(bad, (error) => error.code === "invalid" && error.fields.entryId[0] === "not found");
  const lost = store.command("abort");
  store.disconnected({ reason: "closed", retryInMs: 500, attempt: 1 });
  await assert.rejects(lost, (error) => error.code === "disconnected");
  assert.equal(store.connection.state, "reconnecting");
});

test("an in-flight subagent batch keeps the page busy without an empty streaming reply", () => {
  const store = new SessionStore();
  const snapshot = {
    session: { sessionId: "s" }, revision: 4, leafId: "p1", entries: [{ type: "message", id: "p1", parentId: null, timestamp: "t", message: { role: "user", content: "hi" } }],
    activePath: ["p1"], childrenByParentId: { root: ["p1"] }, labelsByEntryId: {}, inFlight: null, runtimeContext: {},
    page: { totalEntries: 1, includedEntries: 1, truncated: false, activePathLength: 1, activePathTruncated: false, limit: 2000 },
  };
  store.receive({ type: "snapshot", snapshot });
  const batch = { type: "subagent_batch", id: "b1", parentId: "p1", timestamp: "t", batchId: "x", mode: "parallel", runs: [] };
  store.receive({ type: "session_entry_added", revision: 5, sessionId: "s", entry: batch, leafId: "b1", inFlight: true });
  assert.equal(store.live, null);
  assert.equal(store.running, true);
  store.receive({ type: "session_entry_updated", revision: 6, sessionId: "s", entry: { ...batch, metadata: { state: "finished" } }, inFlight: false });
  assert.equal(store.live, null);
  assert.equal(store.snapshot.inFlight, null);
});

test("an ack or an HTTP answer that comes after the run's end does not bring the run back", () => {
  const store = new SessionStore();
  store.receive({ type: "run_state", runId: "r1", state: "running", error: null });
  store.receive({ type: "run_state", runId: "r1", state: "completed", error: null });
  store.setRun({ runId: "r1", state: "queued" }); // the prompt's ack, late
  assert.deepEqual(store.run, { runId: "r1", state: "completed", error: null });
  assert.equal(store.running, false);
  store.setRun({ runId: "r2", state: "queued" }); // a run the socket has not told about yet
  assert.deepEqual(store.run, { runId: "r2", state: "queued", error: null });
  // Re-sent after a reconnect's `subscribed` (or by a heartbeat): the terminal state a lost frame carried.
  store.receive({ type: "run_state", runId: "r2", state: "failed", error: "boom" });
  assert.deepEqual(store.run, { runId: "r2", state: "failed", error: "boom" });
});

test("the REST answer after a reconnect brings the end of a run the socket only saw running", () => {
  const store = new SessionStore();
  store.receive({ type: "run_state", runId: "r1", state: "running", error: null });
  store.setRun({ runId: "r1", state: "completed" });
  assert.deepEqual(store.run, { runId: "r1", state: "completed", error: null });
  store.setRun({ runId: "r1", state: "running" });
  assert.equal(store.run.state, "completed");
});

test("run notes (a failover, a clamped thinking level) belong to their run", () => {
  const store = new SessionStore();
  store.receive({ type: "run_state", runId: "r1", state: "running", error: null });
  store.receive({ type: "run_note", runId: "r1", kind: "failover", text: "primary failed: 529 overloaded_error: Overloaded; trying backup" });
  store.receive({ type: "run_note", runId: "r1", kind: "failover", text: "answered by backup after primary failed: 529 overloaded_error: Overloaded" });
  assert.deepEqual(store.runNotes.notes.map((n) => n.text), [
    "primary failed: 529 overloaded_error: Overloaded; trying backup",
    "answered by backup after primary failed: 529 overloaded_error: Overloaded",
  ]);
  store.receive({ type: "run_state", runId: "r1", state: "completed", error: null });
  assert.equal(store.runNotes.runId, "r1"); // the run's end keeps its notes on show
  store.receive({ type: "run_note", runId: "r2", kind: "thinking", text: "thinking high → off: model m does not think" });
  assert.deepEqual(store.runNotes, { runId: "r2", notes: [{ kind: "thinking", text: "thinking high → off: model m does not think" }] });
  // After a reload: the REST runs list's notes of the run still going.
  const reloaded = new SessionStore();
  reloaded.setRun({ runId: "r3", state: "running", error: null, notes: [{ kind: "failover", text: "answered by b after a failed: x", at: 1 }] });
  assert.deepEqual(reloaded.runNotes, { runId: "r3", notes: [{ kind: "failover", text: "answered by b after a failed: x" }] });
  assert.deepEqual(reloaded.run, { runId: "r3", state: "running", error: null });
});
