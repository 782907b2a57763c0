// The tree sidebar's rows: every entry as a node, flattened for a virtual list.
//
// Pure (node-tested). Chains of single children stay at one indentation level and
// only branch points indent their children, so a 10k-entry conversation does not
// walk off the right edge. Filters hide nodes; the children of a hidden node are
// shown in its place. The in-flight entry is shown under its parent.

import { ROOT_KEY } from "./tree_events.js";
import { cutText, plainText } from "./plain_text.js";
import { splitDocuments } from "./documents.js";
import { t, tn } from "./i18n.js";

export const FILTERS = [
  { id: "all", get label() { return t("All"); } },
  { id: "messages", get label() { return t("Messages"); } },
  { id: "labeled", get label() { return t("Labeled"); } },
];

/**
 * Bookkeeping entries: titles (`session_info`), labels, model and thinking-level changes,
 * custom state (feedback). They change how the session is shown or run, say nothing in the
 * conversation, and are folded into their neighbours in the tree unless `notes` is on (the
 * tree's *Notes* toggle): the row before them stands for them, the leaf mark included.
 */
export const BOOKKEEPING = new Set(["session_info", "label", "model_change", "thinking_level_change", "custom"]);

const ICONS = {
  user: "U",
  assistant: "A",
  tool: "T",
  compaction: "C",
  branch_summary: "⎇",
  custom_message: "✉",
  custom: "⚙",
  label: "L",
  session_info: "✎",
  model_change: "◆",
  thinking_level_change: "θ",
  subagent_batch: "⇶",
  subagent_result: "↳",
  bash: "$",
  other: "•",
};

export function entryKind(entry) {
  switch (entry?.type) {
    case "message": {
      const role = entry.message?.role;
      if (role === "user") return "user";
      if (role === "assistant") return "assistant";
      if (role === "toolResult") return "tool";
      if (role === "bashExecution") return "bash";
      if (role === "custom") return "custom_message";
      return "other";
    }
    case "compaction":
    case "branch_summary":
    case "custom_message":
    case "custom":
    case "label":
    case "session_info":
    case "model_change":
    case "thinking_level_change":
      return entry.type;
    case "subagent_batch":
    case "subagent_result":
      return entry.type;
    default:
      return "other";
  }
}

export function kindIcon(kind) {
  return ICONS[kind] ?? ICONS.other;
}

/** Plain text of message content (a string or blocks). */
export function contentText(content, { withThinking = false } = {}) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts = [];
  for (const block of content) {
    if (block?.type === "text" && typeof block.text === "string") parts.push(block.text);
    else if (withThinking && block?.type === "thinking" && typeof block.thinking === "string") parts.push(block.thinking);
  }
  return parts.join("\n");
}

/** One line that says what an entry is, for the tree and for banners. */
export function firstLine(entry, max = 140) {
  let line;
  try {
    line = describe(entry);
    if (typeof line !== "string") line = String(line);
  } catch {
    line = `(could not be shown: ${entry?.type ?? "?"})`; // a shape this page does not know
  }
  const kind = entryKind(entry);
  if (kind === "assistant" || kind === "user" || kind === "branch_summary" || kind === "custom_message") line = plainText(line); // markdown marks read badly in one line
  line = line.replace(/\s+/g, " ").trim();
  return cutText(line, max);
}

function describe(entry) {
  const kind = entryKind(entry);
  const message = entry?.message;
  switch (kind) {
    case "user": {
      const { text, documents } = splitDocuments(message.content);
      const files = documents.map((d) => `[${d.name}]`).join(" ");
      const extra = [files, Array.isArray(message.content) && message.content.some((b) => b?.type === "image") ? t("[image]") : ""].filter(Boolean).join(" ");
      return [text, extra].filter(Boolean).join(" ") || t("(empty)");
    }
    case "assistant": {
      const text = contentText(message.content);
      const calls = (Array.isArray(message.content) ? message.content : []).filter((b) => b?.type === "toolCall").map((b) => b.name);
      const tail = calls.length ? ` [${calls.join(", ")}]` : "";
      if (message.stopReason === "error") return t("error: {message}", { message: message.errorMessage ?? "" });
      if (!text && message.stopReason === "aborted") return `${t("(aborted)")}${tail}`;
      return (text || contentText(message.content, { withThinking: true }) || t("(no text)")) + tail;
    }
    case "tool":
      return `${message.toolName ?? "tool"}: ${contentText(message.content)}`;
    case "bash":
      return `$ ${message.command ?? ""}`;
    case "compaction":
      return t("compaction ({tokens} tokens before)", { tokens: entry.tokensBefore ?? "?" });
    case "branch_summary":
      return t("branch summary: {summary}", { summary: entry.summary ?? "" });
    case "custom_message":
      return `${entry.customType ?? message?.customType ?? "custom"}: ${contentText(entry.content ?? message?.content)}`;
    case "custom":
      return `custom: ${entry.customType ?? ""}`;
    case "label":
      return entry.label ? t("label “{label}”", { label: entry.label }) : t("label cleared");
    case "session_info":
      return t("name: {name}", { name: entry.name ?? "" });
    case "model_change":
      return t("model: {model}", { model: `${entry.provider ?? ""}/${entry.modelId ?? ""}` });
    case "thinking_level_change":
      return t("thinking: {level}", { level: entry.thinkingLevel ?? "" });
    case "subagent_batch": {
      const runs = Array.isArray(entry.runs) ? entry.runs : [];
      const done = runs.filter((r) => r?.status === "completed").length;
      const state = entry.metadata?.state ?? "running";
      return t("subagents ({mode}): {done} of {all} completed · {state}", { mode: entry.mode ?? "batch", done, all: runs.length, state });
    }
    case "subagent_result":
      return `${entry.agent ?? "subagent"}: ${entry.status ?? "?"}${entry.content?.results?.[0]?.finalText ? ` — ${entry.content.results[0].finalText}` : ""}`;
    default:
      return entry?.type ?? "?";
  }
}

function visibleFor(filter, labels, notes) {
  if (filter === "messages") return (entry) => {
    const kind = entryKind(entry);
    return kind === "user" || kind === "assistant";
  };
  if (filter === "labeled") return (entry) => Object.prototype.hasOwnProperty.call(labels, entry.id) && (notes || !BOOKKEEPING.has(entryKind(entry)));
  if (!notes) return (entry) => !BOOKKEEPING.has(entryKind(entry));
  return () => true;
}

/**
 * The snapshot as the tree sees it once older entries have been paged in
 * (`older`: {entries, pathOnly, below}, see SessionStore.loadOlder).
 *
 * A truncated snapshot holds the entries on its active path that are older than
 * its window (`pathOnly` of them, first, in stored order), then the window. The
 * pages loaded so far cover the positions from `below` up to the window, so in
 * stored order the whole is: path entries older than `below`, the loaded pages,
 * the window. Children lists are rebuilt from that order; the active path is
 * extended towards the root through what is now known.
 */
export function withOlder(snapshot, older, lookup) {
  if (!snapshot || !older || older.entries.length === 0) return snapshot;
  const loaded = new Set(older.entries.map((e) => e.id));
  const before = snapshot.entries.slice(0, older.pathOnly).filter((e) => !loaded.has(e.id));
  const entries = [...before, ...older.entries, ...snapshot.entries.slice(older.pathOnly)];
  const childrenByParentId = {};
  for (const entry of entries) {
    const key = typeof entry.parentId === "string" ? entry.parentId : ROOT_KEY;
    const list = (childrenByParentId[key] ??= []);
    if (!list.includes(entry.id)) list.push(entry.id);
  }
  let activePath = snapshot.activePath;
  if (snapshot.page?.activePathTruncated && activePath.length) {
    const earlier = [];
    for (let id = lookup(activePath[0])?.parentId; typeof id === "string"; id = lookup(id)?.parentId) {
      if (lookup(id) === undefined) break;
      earlier.push(id);
    }
    activePath = [...earlier.reverse(), ...activePath];
  }
  return {
    ...snapshot,
    entries,
    childrenByParentId,
    activePath,
    page: {
      ...snapshot.page,
      truncated: older.below > 0,
      includedEntries: entries.length,
      activePathTruncated: Boolean(snapshot.page?.activePathTruncated) && activePath.length < snapshot.page.activePathLength,
    },
  };
}

/**
 * Rows for the sidebar. `lookup(id)` gives entries; `collapsed` is a Set of ids
 * whose subtrees are hidden; `expanded` a Set of ids whose folded run is shown.
 * Returns {rows, indexById, total, shown}.
 */
export function buildRows({ snapshot, lookup, filter = "all", collapsed = new Set(), expanded = new Set(), notes = false }) {
  const children = snapshot.childrenByParentId;
  const labels = snapshot.labelsByEntryId ?? {};
  const inFlight = snapshot.inFlight;
  const onPath = new Set(snapshot.activePath);
  const isVisible = visibleFor(filter, labels, notes);
  const get = (id) => (inFlight && inFlight.id === id ? inFlight : lookup(id));
  // The leaf's row: the leaf, or when it is a folded bookkeeping entry (a title, a label just
  // written) the entry it follows, which stands for it.
  let leafId = snapshot.leafId;
  for (let hops = 0; !notes && typeof leafId === "string" && BOOKKEEPING.has(entryKind(get(leafId))) && hops < 10_000; hops++) {
    const parent = get(leafId)?.parentId;
    leafId = typeof parent === "string" ? parent : null;
  }
  const kidsOf = (key) => {
    const list = children[key] ?? [];
    if (inFlight && (typeof inFlight.parentId === "string" ? inFlight.parentId : ROOT_KEY) === key && !list.includes(inFlight.id)) return [...list, inFlight.id];
    return list;
  };

  // Roots: parentless entries, and entries whose parent is outside a truncated snapshot.
  const roots = [...kidsOf(ROOT_KEY)];
  if (snapshot.page?.truncated) {
    for (const entry of snapshot.entries) {
      if (typeof entry.parentId === "string" && lookup(entry.parentId) === undefined) roots.push(entry.id);
    }
  }

  // Pre-order of every node (iterative: a conversation is a 10k-deep chain).
  const order = [];
  const stack = [...roots].reverse();
  const seen = new Set();
  while (stack.length) {
    const id = stack.pop();
    if (seen.has(id)) continue;
    seen.add(id);
    order.push(id);
    const kids = kidsOf(id);
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
  }
  // Visible children of each node: hidden nodes hand their own visible children up.
  // With no filter every node is shown and a node's visible children are its children:
  // skip that pass (it is most of the cost on a 10k-entry tree).
  const everything = filter === "all" && !snapshot.page?.truncated && (notes || !snapshot.entries.some((e) => BOOKKEEPING.has(entryKind(e))));
  const visibleKids = everything ? { get: kidsOf } : new Map();
  const shown = everything ? { get: (id) => seen.has(id) } : new Map();
  for (let i = everything ? -1 : order.length - 1; i >= 0; i--) {
    const id = order[i];
    const entry = get(id);
    // A bookkeeping entry where branches split stays: its row carries the branch point.
    shown.set(id, entry !== undefined && (isVisible(entry) || id === leafId || (filter === "all" && kidsOf(id).length > 1)));
    const kids = kidsOf(id);
    let out = [];
    for (const kid of kids) {
      if (!seen.has(kid)) continue;
      if (shown.get(kid)) {
        out.push(kid);
        continue;
      }
      const handed = visibleKids.get(kid) ?? [];
      if (kids.length === 1) out = handed; // a chain: share, do not copy
      else for (const h of handed) out.push(h);
    }
    visibleKids.set(id, out);
  }
  let top = [];
  for (const id of roots) {
    if (!seen.has(id)) continue;
    if (shown.get(id)) top.push(id);
    else top = top.concat(visibleKids.get(id) ?? []);
  }

  const rows = [];
  const indexById = new Map();
  const emit = [];
  let folded = 0;
  const push = (row) => {
    indexById.set(row.id, rows.length);
    rows.push(row);
  };
  // A run of single-child entries off the active path (an abandoned branch's tool
  // rounds) folds into one row when it is at least FOLD_MIN long: its first entry, "⋯ n
  // more", then its tip. Unfolded for good with `expanded` (the first entry's id).
  const foldable = (id) => {
    const kids = visibleKids.get(id) ?? [];
    return kids.length === 1 && !onPath.has(id) && id !== leafId && !Object.prototype.hasOwnProperty.call(labels, id) && !collapsed.has(id) && id !== inFlight?.id;
  };
  for (let i = top.length - 1; i >= 0; i--) emit.push([top[i], 0, top.length > 1, NO_GUIDES, null, false]);
  while (emit.length) {
    const [id, depth, sibling, guides, connector, unfolded] = emit.pop();
    const entry = get(id);
    const kids = visibleKids.get(id) ?? [];
    const kind = entryKind(entry);
    const rawKids = kidsOf(id).length;
    const row = {
      id,
      depth,
      kind,
      entry, // the row's text is computed when it is drawn (rowText): only visible rows pay for it
      label: labels[id] ?? null,
      onPath: onPath.has(id),
      isLeaf: id === leafId,
      inFlight: id === inFlight?.id,
      branchPoint: rawKids > 1 ? rawKids : 0,
      hasChildren: kids.length > 0,
      collapsed: collapsed.has(id) && kids.length > 0,
      startsBranch: sibling,
      guides, // per level above this row: does a later sibling's line pass here (│)
      connector, // "mid" (├─) or "last" (└─) on the first row of a sibling, else null
    };
    push(row);
    if (row.collapsed) continue;
    if (kids.length > 1) {
      for (let i = kids.length - 1; i >= 0; i--) {
        const more = i < kids.length - 1;
        emit.push([kids[i], depth + 1, true, [...guides, more], more ? "mid" : "last", false]);
      }
      continue;
    }
    if (kids.length === 0) continue;
    let next = kids[0];
    const open = unfolded || expanded.has(id); // an unfolded run stays open down to its end
    if (!open && foldable(id)) {
      let count = 0;
      let end = next;
      while (foldable(end)) {
        count += 1;
        end = visibleKids.get(end)[0];
      }
      if (count >= FOLD_MIN) {
        folded += count - 1; // folded entries are shown, in one row
        push({ id: `fold:${id}`, depth, kind: "fold", entry: null, foldOf: id, count, label: null, onPath: false, isLeaf: false, inFlight: false, branchPoint: 0, hasChildren: false, collapsed: false, startsBranch: false, guides, connector: null });
        next = end;
      }
    }
    emit.push([next, depth, false, guides, null, open && next === kids[0] && foldable(id)]);
  }
  return { rows, indexById, total: order.length, shown: rows.length + folded, leafId };
}

// Shorter runs stay drawn: folding three entries hides a question without saving room.
export const FOLD_MIN = 6;
const NO_GUIDES = [];

/** What a row draws left of its icon, one cell per level: "│", "├", "└" or " ". */
export function rowGuides(row, maxLevels = 24) {
  const cells = [];
  const levels = row.guides ?? NO_GUIDES;
  for (let level = 0; level < levels.length; level++) {
    if (level === levels.length - 1 && row.connector) cells.push(row.connector === "mid" ? "├" : "└");
    else cells.push(levels[level] ? "│" : " ");
  }
  return cells.length > maxLevels ? cells.slice(cells.length - maxLevels) : cells;
}

const TEXTS = new WeakMap();

/** The one-line text of a row (cached per entry: entries never change once stored). */
export function rowText(row) {
  if (row.kind === "fold") return `⋯ ${tn("{n} more entry", "{n} more entries", row.count)}`;
  if (row.inFlight && row.entry.type === "message") return contentText(row.entry.message?.content) ? firstLine(row.entry) : "streaming…";
  if (row.inFlight) return firstLine(row.entry); // a subagent batch: its checkpointed statuses
  let text = TEXTS.get(row.entry);
  if (text === undefined) {
    text = firstLine(row.entry);
    TEXTS.set(row.entry, text);
  }
  return text;
}

/** Pi's rule for "continue from here": a user (or custom) message goes back to the editor. */
export function continueTarget(entry) {
  const kind = entryKind(entry);
  if (kind === "user") return { mode: "edit", text: contentText(entry.message.content), branchFrom: entry.parentId ?? null };
  if (entry?.type === "custom_message") return { mode: "edit", text: contentText(entry.content), branchFrom: entry.parentId ?? null };
  return { mode: "leaf", leafId: entry.id };
}

/** True when moving the leaf to `targetId` leaves entries behind (the old leaf is not on the new path). */
export function leavesBranch(snapshot, lookup, targetId) {
  const leaf = snapshot.leafId;
  if (leaf === null || leaf === undefined || leaf === targetId) return false;
  let cursor = targetId;
  const seen = new Set();
  while (typeof cursor === "string" && !seen.has(cursor)) {
    if (cursor === leaf) return false; // moving forward along the path
    seen.add(cursor);
    cursor = lookup(cursor)?.parentId;
  }
  return true;
}

/**
 * How many messages (user and assistant) a move of the leaf to `targetId` leaves behind:
 * those on the active path after the last entry it shares with the target's path (what a
 * branch summary would summarize). 0 when the move goes forward or stays.
 */
export function messagesLeft(snapshot, lookup, targetId) {
  const path = Array.isArray(snapshot?.activePath) ? snapshot.activePath : [];
  if (!path.length || targetId === snapshot.leafId) return 0;
  const ancestors = new Set();
  for (let id = targetId, hops = 0; typeof id === "string" && !ancestors.has(id) && hops < 1_000_000; hops++) {
    ancestors.add(id);
    id = lookup(id)?.parentId;
  }
  let count = 0;
  for (let i = path.length - 1; i >= 0 && !ancestors.has(path[i]); i--) {
    const kind = entryKind(lookup(path[i]));
    if (kind === "user" || kind === "assistant") count += 1;
  }
  return count;
}

/** A branch this long (messages left behind) is worth a summary: the tree offers one. */
export const LONG_BRANCH_MESSAGES = 6;
