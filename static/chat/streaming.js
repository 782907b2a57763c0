// The streaming assistant message: the in-flight entry plus the streaming events on top.
//
// Streaming events are an ephemeral, lossy projection (docs/realtime.md); the in-flight
// entry's checkpoints (tree events, about once a second) and its finalization are
// the truth. Each text/thinking block remembers how much of its text came from
// deltas (`seen`); a checkpoint that is ahead fills in what was missed, and deltas
// that repeat text the checkpoint already showed are dropped. After a reload the
// position of the next delta is unknown, so the first one is joined on its overlap
// with the checkpoint's tail. Pure functions: a new object whenever something changed.

const TEXT_FIELD = { text: "text", thinking: "thinking" };
const MIN_OVERLAP = 8;

export function createLive(inFlight, { reloaded = false } = {}) {
  const message = inFlight.message ?? { role: "assistant", content: [] };
  const content = (Array.isArray(message.content) ? message.content : []).map((block) => {
    const field = TEXT_FIELD[block?.type];
    if (!field) return { ...block };
    const text = typeof block[field] === "string" ? block[field] : "";
    return { ...block, [field]: text, _seen: reloaded ? -1 : text.length };
  });
  return { entryId: inFlight.id, runId: null, message: { ...message, content }, ended: false, stopReason: null };
}

/** A checkpoint of the in-flight entry (or the snapshot's copy) arrived. */
export function liveApplyCheckpoint(live, inFlight) {
  const checkpoint = Array.isArray(inFlight.message?.content) ? inFlight.message.content : [];
  const content = [...live.message.content];
  let changed = false;
  checkpoint.forEach((block, index) => {
    const mine = content[index];
    const field = TEXT_FIELD[block?.type];
    if (mine === undefined || mine.type !== block.type) {
      content[index] = field ? { ...block, _seen: -1 } : { ...block };
      changed = true;
    } else if (field) {
      const theirs = typeof block[field] === "string" ? block[field] : "";
      const ours = mine[field];
      if (ours.startsWith(theirs)) return; // we are ahead (or equal)
      content[index] = theirs.startsWith(ours) ? { ...mine, [field]: theirs } : { ...mine, [field]: theirs, _seen: theirs.length };
      changed = true;
    } else if (block.type === "toolCall" && mine.argsText !== undefined) {
      content[index] = { ...block };
      changed = true;
    }
  });
  const { content: _ignored, ...rest } = inFlight.message ?? {};
  if (!changed) return { ...live, message: { ...live.message, ...rest, content: live.message.content } };
  return { ...live, message: { ...live.message, ...rest, content } };
}

/** One streaming event; returns `live` itself when the event does not concern it. */
export function liveApplyStream(live, event) {
  const type = event.type;
  if (type === "assistant_stream_start") {
    if (live && live.entryId === event.entryId) return live.runId === event.runId ? live : { ...live, runId: event.runId ?? null };
    return { ...createLive({ id: event.entryId }), runId: event.runId ?? null };
  }
  if (!event.entryId) return live;
  if (live === null || live.entryId !== event.entryId) {
    if (type === "assistant_stream_end") return live;
    live = createLive({ id: event.entryId }, { reloaded: true }); // we missed the start
  }
  if (type === "assistant_stream_end") return { ...live, ended: true, stopReason: event.stopReason ?? null };
  const index = event.contentIndex;
  if (!Number.isInteger(index) || index < 0 || index > 10_000) return live;
  const content = [...live.message.content];
  while (content.length <= index) content.push({ type: "text", text: "", _seen: 0 });
  const block = content[index];
  if (type === "assistant_stream_delta") {
    const field = TEXT_FIELD[event.kind] ?? "text";
    const kind = event.kind === "thinking" ? "thinking" : "text";
    const current = block.type === kind ? block : { type: kind, [field]: "", _seen: 0 };
    content[index] = appendDelta(current, field, typeof event.delta === "string" ? event.delta : "", event.offset);
  } else if (type === "tool_call_started") {
    content[index] = { type: "toolCall", id: event.toolCallId ?? null, name: event.name ?? "", arguments: {}, argsText: "" };
  } else if (type === "tool_call_delta") {
    const current = block.type === "toolCall" ? block : { type: "toolCall", id: null, name: "", arguments: {}, argsText: "" };
    content[index] = { ...current, argsText: (current.argsText ?? "") + (event.delta ?? "") };
  } else if (type === "tool_call_completed") {
    const call = event.toolCall ?? {};
    const omitted = Array.isArray(event.omitted) && event.omitted.includes("toolCall.arguments");
    content[index] = omitted ? { ...block, ...call, type: "toolCall" } : { ...call, type: "toolCall" };
  } else {
    return live;
  }
  return { ...live, message: { ...live.message, content } };
}

function appendDelta(block, field, delta, offset) {
  const text = block[field] ?? "";
  if (Number.isInteger(offset) && offset >= 0 && offset <= text.length) {
    // A delta that says where it goes (not sent by the runtime yet, see docs/chat.md).
    const next = text.slice(0, offset) + delta;
    return { ...block, [field]: next.length >= text.length ? next : text, _seen: offset + delta.length };
  }
  const seen = block._seen ?? text.length;
  if (seen < 0) {
    // First delta after a reload: join it on its overlap with the checkpoint's tail.
    const overlap = tailOverlap(text, delta);
    const next = text + delta.slice(overlap);
    return { ...block, [field]: next, _seen: next.length };
  }
  const expected = text.slice(seen);
  if (expected === "") return { ...block, [field]: text + delta, _seen: seen + delta.length };
  if (expected.startsWith(delta)) return { ...block, _seen: seen + delta.length }; // a checkpoint showed it already
  if (delta.startsWith(expected)) {
    const next = text + delta.slice(expected.length);
    return { ...block, [field]: next, _seen: next.length };
  }
  const next = text + delta; // what the checkpoint showed was not pending after all
  return { ...block, [field]: next, _seen: next.length };
}

/** The longest k with text.endsWith(delta.slice(0, k)), counted only if k is the whole delta or long enough. */
export function tailOverlap(text, delta) {
  const max = Math.min(text.length, delta.length);
  for (let k = max; k > 0; k--) {
    if (k < delta.length && k < MIN_OVERLAP) return 0;
    if (text.endsWith(delta.slice(0, k))) return k;
  }
  return 0;
}

/** The message as it should be drawn: blocks without the bookkeeping fields. */
export function liveMessage(live) {
  if (!live) return null;
  return { ...live.message, content: live.message.content.map(({ _seen, ...block }) => block) };
}
