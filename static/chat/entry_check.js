// What the conversation can draw (pure, node-tested).
//
// Entries are stored losslessly, so a session can hold anything JSON can: an
// entry another program wrote, a field of the wrong type, a block type this page
// does not know. The page draws every entry it can and marks the others ("this
// entry could not be shown", with its id and type) one by one; it never lets one
// entry take the conversation down. `entryProblem` says why an entry cannot be
// drawn (null when it can); `blockProblem` does the same for one content block,
// which is then marked in place while the rest of its message is drawn.

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isString = (v) => typeof v === "string";
const optionalString = (v) => v === undefined || v === null || typeof v === "string";

/** A finite number, or null (for usage and costs, which other writers may get wrong). */
export function num(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** Any JSON value as text to show (strings as they are, the rest as JSON). */
export function text(value) {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return "";
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

// Content blocks each role may hold, and what each block needs to be drawn.
const BLOCKS = {
  text: (b) => isString(b.text) || "text is not a string",
  thinking: (b) => optionalString(b.thinking) || "thinking is not a string",
  image: (b) => (isString(b.data) && isString(b.mimeType)) || "image without data or mimeType",
  toolCall: (b) => (optionalString(b.id) && optionalString(b.name) && (b.arguments === undefined || isObject(b.arguments))) || "tool call with a bad id, name or arguments",
};
const ROLE_BLOCKS = {
  user: ["text", "image"],
  assistant: ["text", "thinking", "toolCall"],
  toolResult: ["text", "image"],
  custom: ["text", "image"],
};

/** Why this content block cannot be drawn in a message of `role`; null when it can. */
export function blockProblem(block, role) {
  if (!isObject(block)) return `a content block that is not an object (${text(block).slice(0, 40)})`;
  if (!isString(block.type)) return "a content block without a type";
  const allowed = ROLE_BLOCKS[role] ?? Object.keys(BLOCKS);
  if (!allowed.includes(block.type) || !BLOCKS[block.type]) return `a content block of unknown type “${block.type.slice(0, 40)}”`;
  const ok = BLOCKS[block.type](block);
  return ok === true ? null : ok;
}

function contentProblem(content, { stringOk }) {
  if (content === undefined || content === null) return null; // nothing to draw is fine
  if (isString(content)) return stringOk ? null : "content is text where a list of blocks belongs";
  if (!Array.isArray(content)) return `content is ${typeof content}, not a list of blocks`;
  return null;
}

function messageProblem(message) {
  if (!isObject(message)) return "the message is missing or not an object";
  if (!isString(message.role)) return message.role === undefined ? "the message has no role" : "the message's role is not a string";
  switch (message.role) {
    case "user":
    case "custom":
      return contentProblem(message.content, { stringOk: true });
    case "assistant":
      return (
        contentProblem(message.content, { stringOk: false }) ??
        (optionalString(message.stopReason) ? null : "stopReason is not a string") ??
        (message.usage === undefined || message.usage === null || isObject(message.usage) ? null : "usage is not an object")
      );
    case "toolResult":
      return contentProblem(message.content, { stringOk: true }) ?? (optionalString(message.toolCallId) ? null : "toolCallId is not a string");
    case "bashExecution":
      return optionalString(message.command) && optionalString(message.output) ? null : "command or output is not a string";
    default:
      return null; // an unknown role: drawn as a one-line note
  }
}

/** Why `entry` cannot be drawn; null when it can. */
export function entryProblem(entry) {
  if (!isObject(entry)) return "not an entry object";
  if (!isString(entry.id)) return "the entry has no id";
  if (!isString(entry.type)) return "the entry has no type";
  switch (entry.type) {
    case "message":
      return messageProblem(entry.message);
    case "compaction":
    case "branch_summary":
      return optionalString(entry.summary) ? null : "summary is not a string";
    case "custom_message":
      return contentProblem(entry.content ?? entry.message?.content, { stringOk: true });
    default:
      return null;
  }
}

/** "message/assistant", "compaction" …: how the mark names an entry's type. */
export function entryTypeName(entry) {
  if (!isObject(entry)) return typeof entry;
  const type = isString(entry.type) ? entry.type : "?";
  const role = isObject(entry.message) && isString(entry.message.role) ? entry.message.role : null;
  return type === "message" ? `message/${role ?? "?"}` : type;
}
