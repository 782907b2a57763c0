// What a session is called before anyone named it: its first message, as plain text.

import { firstLine } from "./tree_model.js";
import { plainText } from "./plain_text.js";
import { t } from "./i18n.js";

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

/** Whether the open session holds no message yet (model and thinking-level notes do not count). */
export function untouched(store) {
  const snapshot = store.snapshot;
  if (!snapshot || snapshot.page?.truncated) return false;
  return !snapshot.entries.some((e) => e?.type === "message" || e?.type === "compaction" || e?.type === "branch_summary");
}

/**
 * What the open session is called: its title, else its first message, else "New session"
 * while it holds nothing (a fresh session is not an "Untitled" one), else "Untitled session".
 */
export function shownTitle(store, storedTitle = "") {
  const title = store.snapshot?.session?.title || storedTitle;
  if (title) return { text: title, named: true };
  const first = provisionalTitle(store);
  if (first) return { text: first, named: false };
  return { text: untouched(store) ? t("New session") : t("Untitled session"), named: false };
}
