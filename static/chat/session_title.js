// What a session is called before anyone named it: its first message, as plain text.

import { firstLine } from "./tree_model.js";
import { plainText } from "./plain_text.js";

export function provisionalTitle(store) {
  const snapshot = store.snapshot;
  if (!snapshot) return "";
  for (const id of snapshot.activePath) {
    const entry = store.entry(id);
    if (entry?.type === "message" && entry.message?.role === "user") return plainText(firstLine(entry, 80));
  }
  return "";
}

/** How many entries the open session holds now (the list's figure is from page load). */
export function liveEntryCount(store) {
  const snapshot = store.snapshot;
  if (!snapshot) return null;
  return snapshot.page?.totalEntries ?? snapshot.entries.length;
}
