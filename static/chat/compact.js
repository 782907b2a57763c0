// Compaction from the page: the status bar's button and `/compact [instructions]`
// (composer_model.js parses the command) call the REST API instead of sending a prompt.

import { api } from "./api.js";

export function compactSession(sessionId, instructions = "") {
  return api(`sessions/${encodeURIComponent(sessionId)}/compact/`, { method: "POST", body: instructions ? { instructions } : {} });
}
