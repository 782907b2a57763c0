// What the conversation shows: the active path as items (pure, node-tested).
//
// Tool results are not items of their own: they belong to the tool call that
// asked for them and are drawn in its card. Entries that only steer the session
// (labels, names, custom state) are left out of the conversation (the tree shows
// them); model and thinking-level changes become small notes.

import { entryKind } from "./tree_model.js";
import { entryProblem, entryTypeName, num } from "./entry_check.js";

const HIDDEN = new Set(["label", "session_info", "custom"]);

/**
 * The active path as conversation items. An entry the page cannot draw
 * (entry_check.js) becomes an item of kind "unrenderable" with its reason, in its
 * place; nothing about one entry stops the others from being listed.
 */
export function conversationItems(snapshot, lookup) {
  const inFlightId = snapshot.inFlight?.id ?? null;
  const items = [];
  const callOwner = new Map(); // toolCallId -> item
  const batchOwner = new Map(); // subagent batchId -> item
  let turn = null; // totals since the last user message
  const path = Array.isArray(snapshot.activePath) ? snapshot.activePath : [];
  for (const id of path) {
    if (id === inFlightId) continue;
    const entry = lookup(id);
    if (entry === undefined) continue;
    try {
      const problem = entryProblem(entry);
      if (problem) {
        items.push(unrenderable(id, entry, problem));
        continue;
      }
      const kind = entryKind(entry);
      if (HIDDEN.has(kind)) continue;
      if (kind === "custom_message" && entry.display === false) continue;
      if (kind === "subagent_result") {
        // A child's result belongs to its batch's panel (keyed by the child's run id).
        const owner = batchOwner.get(entry.batchId);
        if (owner) {
          owner.results = { ...owner.results, [entry.runId]: entry };
          owner.resultsKey += `${entry.id};`;
          continue;
        }
      }
      if (kind === "tool") {
        const owner = callOwner.get(entry.message.toolCallId);
        if (owner) {
          owner.results = { ...owner.results, [entry.message.toolCallId]: entry };
          owner.resultsKey += `${entry.id};`;
          continue;
        }
      }
      const item = { id, entry, kind, results: {}, resultsKey: "", turnUsage: null };
      if (kind === "subagent_batch") batchOwner.set(entry.batchId, item);
      if (kind === "user") turn = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, messages: 0, lastItem: null };
      if (kind === "assistant") {
        for (const block of entry.message.content ?? []) if (block?.type === "toolCall" && typeof block.id === "string") callOwner.set(block.id, item);
        const usage = entry.message.usage;
        if (usage && turn) {
          turn.input += num(usage.input) ?? 0;
          turn.output += num(usage.output) ?? 0;
          turn.cacheRead += num(usage.cacheRead) ?? 0;
          turn.cacheWrite += num(usage.cacheWrite) ?? 0;
          turn.cost += num(usage.cost?.total) ?? 0;
          turn.messages += 1;
          if (turn.lastItem) turn.lastItem.turnUsage = null;
          turn.lastItem = item;
          item.turnUsage = turn.messages > 1 ? { ...turn, lastItem: undefined } : null;
        }
      }
      items.push(item);
    } catch (error) {
      items.push(unrenderable(id, entry, error?.message ?? String(error)));
    }
  }
  return items;
}

function unrenderable(id, entry, problem) {
  return { id, entry, kind: "unrenderable", problem, typeName: entryTypeName(entry), results: {}, resultsKey: "", turnUsage: null };
}

/** The user message a failed or aborted assistant message answered (for "retry"). */
export function retryTarget(snapshot, lookup, entryId) {
  let cursor = lookup(entryId)?.parentId;
  const seen = new Set();
  while (typeof cursor === "string" && !seen.has(cursor)) {
    seen.add(cursor);
    const entry = lookup(cursor);
    if (!entry) return null;
    if (entryKind(entry) === "user") return entry;
    cursor = entry.parentId;
  }
  return null;
}

export function formatTokens(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "?";
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(n >= 10_000_000 ? 0 : 1)}M`;
  if (n >= 1000) return `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)}k`;
  return String(n);
}

export function formatCost(dollars) {
  if (typeof dollars !== "number" || !Number.isFinite(dollars)) return dollars === undefined || dollars === null ? "$0" : "$?";
  if (!dollars) return "$0";
  if (dollars < 0.01) return `$${dollars.toFixed(4)}`;
  return `$${dollars.toFixed(2)}`;
}
