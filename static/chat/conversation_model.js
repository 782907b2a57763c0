// What the conversation shows: the active path as items (pure, node-tested).
//
// Tool results are not items of their own: they belong to the tool call that
// asked for them and are drawn in its card. Entries that only steer the session
// (labels, names, custom state) are left out of the conversation (the tree shows
// them); model and thinking-level changes become small notes.

import { entryKind } from "./tree_model.js";
import { entryProblem, entryTypeName, num } from "./entry_check.js";
import { batchOutcome } from "./subagents.js";

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

// ---------------------------------------------------------------- one answer, one card

/**
 * One answer = one card: the assistant messages of a turn (a model call each: thinking,
 * tool calls, interim text) and the subagent batches between them become one item of
 * kind "turn", drawn as one card with the turn's steps under one answer and its actions
 * once. `members` are the items it joins (in path order); `entry` is its last assistant
 * message; `ids` names every entry it draws (members and their tool results), so the tree
 * can point at any of them; `key` changes whenever something it draws does.
 */
export function groupTurns(items) {
  const out = [];
  let group = null;
  for (const item of items) {
    const joins = item.kind === "assistant" || (item.kind === "subagent_batch" && group !== null);
    if (!joins) {
      group = null;
      out.push(item);
      continue;
    }
    if (group === null) {
      group = { id: item.id, kind: "turn", members: [], entry: item.entry, results: {}, resultsKey: "", turnUsage: null, ids: "", key: "" };
      out.push(group);
    }
    group.members.push(item);
    if (item.kind === "assistant") group.entry = item.entry;
    group.ids += `${item.id};${item.resultsKey}`;
    group.key += `${item.id}:${item.resultsKey}|`;
  }
  for (const item of out) if (item.kind === "turn") item.turnUsage = sumUsage(item.members);
  return out;
}

function sumUsage(members) {
  const total = { input: 0, output: 0, cacheRead: 0, cost: 0, messages: 0, estimated: false };
  for (const member of members) {
    const message = member.kind === "assistant" ? member.entry.message : null;
    const usage = message?.usage;
    if (!usage || typeof usage !== "object") continue;
    total.input += num(usage.input) ?? 0;
    const output = num(usage.output) ?? 0;
    const guessed = output === 0 ? streamedTokens(message) : 0;
    total.output += output || guessed;
    total.estimated ||= guessed > 0;
    total.cacheRead += num(usage.cacheRead) ?? 0;
    total.cost += num(usage.cost?.total) ?? 0;
    total.messages += 1;
  }
  return total.messages ? total : null;
}

/**
 * The output tokens of an answer whose model never reported them (stopped mid-stream:
 * Pi's usage stays 0), estimated from what streamed (Pi's rule: four characters a token).
 * 0 when the model reported them or nothing streamed.
 */
export function streamedTokens(message) {
  const content = Array.isArray(message?.content) ? message.content : [];
  let chars = 0;
  for (const b of content) {
    if (b?.type === "text" && typeof b.text === "string") chars += b.text.length;
    else if (b?.type === "thinking" && typeof b.thinking === "string") chars += b.thinking.length;
    else if (b?.type === "toolCall") chars += JSON.stringify(b.arguments ?? {}).length;
  }
  return chars ? Math.ceil(chars / 4) : 0;
}

/**
 * How a turn card splits its members: `final` the answer's text (the last model call's
 * text, when that call did not end on tool calls), `steps` everything before it — each
 * {member, blocks} with the blocks of that call the steps show (thinking, interim text,
 * tool calls), and `batches` the subagent batches (panels of their own, always shown).
 * `stepCount` counts tool calls and interim texts; `tools` names the tools called, in
 * order, once each.
 */
export function turnParts(item) {
  const members = item.members;
  const last = members[members.length - 1];
  const lastMessage = last.kind === "assistant" ? last.entry.message : null;
  const lastBlocks = Array.isArray(lastMessage?.content) ? lastMessage.content : [];
  const hasFinal = lastMessage !== null && lastMessage.stopReason !== "toolUse" && lastBlocks.some((b) => b?.type === "text" && typeof b.text === "string" && b.text.trim());
  let final = hasFinal ? lastBlocks.filter((b) => b?.type === "text").map((b) => b.text).join("\n\n") : "";
  // An answer continued after the output limit (Continue): the cut calls' text is the start
  // of the answer, not a step.
  const continued = new Set();
  for (let i = members.length - 2; hasFinal && i >= 0; i--) {
    const message = members[i].kind === "assistant" ? members[i].entry.message : null;
    if (message?.stopReason !== "length") break;
    continued.add(members[i]);
    final = (Array.isArray(message.content) ? message.content : []).filter((b) => b?.type === "text").map((b) => b.text).join("\n\n") + final;
  }
  const steps = [];
  let stepCount = 0;
  let errors = 0;
  const tools = [];
  const batches = []; // subagent batches: panels of their own, shown whether the steps are open or not
  for (const member of members) {
    if (member.kind !== "assistant") {
      batches.push(member);
      continue;
    }
    const blocks = Array.isArray(member.entry.message.content) ? member.entry.message.content : [];
    const shown = [];
    blocks.forEach((block, index) => {
      if ((member === last || continued.has(member)) && hasFinal && block?.type === "text") return; // the answer itself
      if (block?.type === "toolCall") {
        stepCount += 1;
        if (typeof block.name === "string" && !tools.includes(block.name)) tools.push(block.name);
        if (callFailed(block, member.results?.[block.id])) errors += 1;
      } else if (block?.type === "text" && typeof block.text === "string" && block.text.trim()) stepCount += 1;
      shown.push({ block, index });
    });
    if (shown.length) steps.push({ member, blocks: shown });
  }
  // Only thinking before the answer (no tool, no interim text): no steps box, the thinking shows inline.
  const onlyThinking = stepCount === 0;
  return { final, steps, stepCount, errors, tools, onlyThinking, last, batches };
}

/** Whether a tool call failed as the page tells it: a delegate batch by how it ended
 * (batchOutcome: a child cancelled by hand is not a failure), any other by its result. */
export function callFailed(call, result) {
  const message = result?.message;
  if (!message?.isError) return false;
  const results = message.details?.results;
  if (typeof call?.name === "string" && call.name.startsWith("delegate_") && Array.isArray(results) && results.length) {
    return ["failed", "lost", "timed_out"].includes(batchOutcome(results.map((r) => r?.status), null));
  }
  return true;
}
