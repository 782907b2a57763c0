// The plan (the `todo` tool) and the open question (the `ask_user` tool) at the leaf:
// pure functions of the snapshot, node-tested (tests/js/panels.test.mjs).
//
// Both are ordinary tool calls in the tree (the tree is the truth: docs/realtime.md), so a
// branch switch or a reload rebuilds them from the active path; nothing is kept aside.

export const TODO_STATUSES = ["pending", "in_progress", "completed"];

function cleanTodos(value) {
  if (!Array.isArray(value)) return null;
  const todos = [];
  for (const item of value) {
    if (!item || typeof item.content !== "string" || !TODO_STATUSES.includes(item.status)) return null;
    todos.push({ content: item.content, status: item.status });
  }
  return todos;
}

/**
 * The plan at the leaf: the last successful `todo` result on the active path, as
 * {todos, done, total, current (the item in progress, else the first pending, else null),
 * entryId}, or null when the path has none. `lookup(id)` → entry.
 */
export function planAt(snapshot, lookup) {
  const path = Array.isArray(snapshot?.activePath) ? snapshot.activePath : [];
  for (let i = path.length - 1; i >= 0; i -= 1) {
    const entry = lookup(path[i]);
    const message = entry?.type === "message" ? entry.message : null;
    if (message?.role !== "toolResult" || message.toolName !== "todo" || message.isError) continue;
    const todos = cleanTodos(message.details?.todos);
    if (todos === null) continue; // another writer's shape: look further back
    const done = todos.filter((t) => t.status === "completed").length;
    const current = todos.find((t) => t.status === "in_progress") ?? todos.find((t) => t.status === "pending") ?? null;
    return { todos, done, total: todos.length, current, entryId: entry.id };
  }
  return null;
}

/**
 * The `ask_user` call the run waits on: on the active path's last assistant message,
 * an `ask_user` call with no result yet. {toolCallId, question, options, allowFreeText,
 * multiSelect, entryId} or null. The run's state says whether it still waits (`waiting`).
 */
export function openQuestion(snapshot, lookup) {
  const open = openCalls(snapshot, lookup);
  const call = open?.calls.find((b) => b.name === "ask_user");
  if (!call) return null;
  const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
  const options = Array.isArray(args.options) ? args.options.filter((o) => typeof o === "string") : [];
  return {
    toolCallId: call.id,
    question: typeof args.question === "string" ? args.question : "",
    options,
    allowFreeText: typeof args.allow_free_text === "boolean" ? args.allow_free_text : options.length === 0,
    multiSelect: Boolean(args.multi_select) && options.length > 0,
    entryId: open.entry.id,
  };
}

/**
 * The tool calls of the active path's last assistant message that have no result yet, in
 * order, with that message's entry: {entry, calls}, or null once a user message follows it
 * (the question and approval panels read what waits from here).
 */
export function openCalls(snapshot, lookup) {
  const path = Array.isArray(snapshot?.activePath) ? snapshot.activePath : [];
  const answered = new Set();
  for (let i = path.length - 1; i >= 0; i -= 1) {
    const entry = lookup(path[i]);
    if (entry?.type !== "message") continue;
    const message = entry.message ?? {};
    if (message.role === "toolResult") {
      answered.add(message.toolCallId);
      continue;
    }
    if (message.role !== "assistant") return null;
    const blocks = Array.isArray(message.content) ? message.content : [];
    return { entry, calls: blocks.filter((b) => b?.type === "toolCall" && !answered.has(b.id)) };
  }
  return null;
}

/**
 * Whether the plan is pinned above the composer: while it has items not done, or — done —
 * while the run that finished it still goes on in the same turn (no user message after it
 * on the active path). A finished plan then stays in its `todo` card in the conversation
 * only: it is not pinned through the turns that follow.
 */
export function planPinned(plan, snapshot, lookup, running) {
  if (!plan || plan.total === 0) return false;
  if (plan.done < plan.total) return true;
  if (!running) return false;
  const path = Array.isArray(snapshot?.activePath) ? snapshot.activePath : [];
  for (let i = path.length - 1; i >= 0 && path[i] !== plan.entryId; i -= 1) {
    const entry = lookup(path[i]);
    if (entry?.type === "message" && entry.message?.role === "user") return false;
  }
  return true;
}
