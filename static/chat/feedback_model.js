// Feedback on answers (pure, node-tested): `custom` entries of customType "neta.feedback"
// with data {entryId, rating: "up" | "down" | null, note}. The newest one on the active
// path or anywhere in the tree for an answer is its feedback (null rating: taken back).

export const FEEDBACK_TYPE = "neta.feedback";

export function isFeedback(entry) {
  return entry?.type === "custom" && entry.customType === FEEDBACK_TYPE && entry.data && typeof entry.data === "object";
}

const BY_ENTRIES = new WeakMap(); // entries array -> Map(entryId -> feedback or null): built once per tree change

/** The feedback given on `entryId` ({rating, note}), or null. */
export function feedbackFor(snapshot, lookup, entryId) {
  const entries = Array.isArray(snapshot?.entries) ? snapshot.entries : [];
  let byId = BY_ENTRIES.get(entries);
  if (byId === undefined) {
    byId = new Map();
    for (const entry of entries) {
      if (!isFeedback(entry) || typeof entry.data.entryId !== "string") continue;
      const rating = entry.data.rating;
      byId.set(entry.data.entryId, rating === "up" || rating === "down" ? { rating, note: typeof entry.data.note === "string" ? entry.data.note : "" } : null);
    }
    BY_ENTRIES.set(entries, byId);
  }
  return byId.get(entryId) ?? null;
}
