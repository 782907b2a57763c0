import { t } from "./i18n.js";
// One visual language (docs/chat.md, "Panels and state tokens"): every status the page
// shows — a tool card, a subagent row, the plan, the question, the run — maps to one of
// these tokens, drawn by the `state-<token>` class and the `--state-<token>` colours.

export const STATE_TOKENS = ["running", "waiting", "done", "partial", "failed", "aborted", "timed-out"];

const BY_STATUS = {
  // runs and children
  queued: "waiting",
  starting: "running",
  running: "running",
  cancelling: "running",
  waiting: "waiting",
  completed: "done",
  partial: "partial",
  failed: "failed",
  lost: "failed",
  cancelled: "aborted",
  aborted: "aborted",
  timed_out: "timed-out",
  // tool cards
  calling: "running",
  done: "done",
  error: "failed",
  // plan items
  pending: "waiting",
  in_progress: "running",
};

/** The state token of a status word (unknown words: "waiting", the neutral one). */
export function stateToken(status) {
  return BY_STATUS[status] ?? "waiting";
}

// Getters: each label in the page's language when it is read (static/chat/i18n.js).
export const STATE_LABELS = {
  get running() { return t("running"); },
  get waiting() { return t("waiting"); },
  get done() { return t("done"); },
  get partial() { return t("partial"); },
  get failed() { return t("failed"); },
  get aborted() { return t("cancelled"); },
  get "timed-out"() { return t("timed out"); },
};
