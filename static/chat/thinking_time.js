// How long the model thought, measured while its answer streams: from the first
// thinking text to the first text or tool call after it (or the end of the stream).
// Stored answers have no timing of their own, so what this browser saw is kept in
// localStorage (bounded) and shown after a reload; answers it never saw streaming
// show their length instead.

const KEY = "neta.thinkingMs";
const LIMIT = 400;
const started = new Map(); // `${entryId}:${index}` -> ms
let known = null;

function load() {
  if (known) return known;
  try {
    known = new Map(Object.entries(JSON.parse(localStorage.getItem(KEY) ?? "{}")));
  } catch {
    known = new Map();
  }
  return known;
}

function save() {
  try {
    localStorage.setItem(KEY, JSON.stringify(Object.fromEntries([...known].slice(-LIMIT))));
  } catch {
    /* full or private: this page keeps them */
  }
}

/** Called on every draw of the streaming message. */
export function trackThinking(entryId, message, ended, now = performance.now()) {
  const blocks = Array.isArray(message?.content) ? message.content : [];
  const times = load();
  blocks.forEach((block, index) => {
    if (block?.type !== "thinking" || !block.thinking) return;
    const key = `${entryId}:${index}`;
    if (times.has(key)) return;
    if (!started.has(key)) started.set(key, now);
    const after = blocks.slice(index + 1).some((b) => (b?.type === "text" && b.text) || b?.type === "toolCall");
    if (after || ended) {
      times.set(key, Math.max(0, Math.round(now - started.get(key))));
      started.delete(key);
      save();
    }
  });
}

/** Milliseconds of thinking for block `index` of `entryId`, or null when unknown. */
export function thinkingMs(entryId, index) {
  const value = load().get(`${entryId}:${index}`);
  return typeof value === "number" ? value : null;
}

/** Still thinking: since when (for the live "Thinking… 3 s"). */
export function thinkingSince(entryId, index) {
  return started.get(`${entryId}:${index}`) ?? null;
}

export function formatDuration(ms) {
  if (ms < 1000) return `${Math.max(0.1, ms / 1000).toFixed(1)} s`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}
