// Compaction from the page: the status bar's button and `/compact [instructions]`
// typed in the composer (Pi's command) call the REST API instead of sending a prompt.

import { api } from "./api.js";

/** The instructions of a `/compact` command (""), or null when `text` is not one. */
export function compactCommand(text) {
  const match = /^\/compact(?:\s+([\s\S]*))?$/.exec(String(text ?? "").trim());
  return match ? (match[1] ?? "").trim() : null;
}

export function compactSession(sessionId, instructions = "") {
  return api(`sessions/${encodeURIComponent(sessionId)}/compact/`, { method: "POST", body: instructions ? { instructions } : {} });
}
