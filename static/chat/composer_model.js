import { t } from "./i18n.js";
// The composer's pure parts (node-tested): slash commands and their completion, the
// queued follow-up/steer messages shown until the run takes them.

export const SLASH_COMMANDS = [
  { name: "compact", get args() { return t("[instructions]"); }, get help() { return t("Summarize the context so far (optional instructions for the summary)"); } },
  { name: "fork", args: "", get help() { return t("Copy the conversation up to here into a new session"); } },
  { name: "name", get args() { return t("<title>"); }, get help() { return t("Rename this session"); } },
  { name: "tree", args: "", get help() { return t("Open the session tree"); } },
];

/**
 * What `text` asks for when it is a slash command: {name, args} for a known one,
 * {error} for an unknown or incomplete one, null for an ordinary message. `//…` is an
 * ordinary message that starts with one slash.
 */
export function parseSlash(text) {
  if (typeof text !== "string" || !text.startsWith("/") || text.startsWith("//")) return null;
  const match = /^\/(\S*)\s*([\s\S]*)$/.exec(text.trimEnd());
  const name = match[1];
  const args = match[2].trim();
  const command = SLASH_COMMANDS.find((c) => c.name === name);
  if (!command) return { error: `Unknown command /${name}. Commands: ${SLASH_COMMANDS.map((c) => `/${c.name}`).join(", ")} (start with // to send a message that begins with /).` };
  if (command.name === "name" && !args) return { error: "/name needs a title: /name <title>" };
  if ((command.name === "fork" || command.name === "tree") && args) return { error: `/${command.name} takes no arguments` };
  return { name, args };
}

/** The commands to offer while `text` is being typed (a slash and no space yet). */
export function slashSuggestions(text) {
  if (typeof text !== "string" || !/^\/\S*$/.test(text) || text.startsWith("//")) return [];
  const typed = text.slice(1).toLowerCase();
  return SLASH_COMMANDS.filter((c) => c.name.startsWith(typed));
}

/** The composer's text once `command` is picked from the suggestions. */
export function completeSlash(command) {
  return `/${command.name}${command.args ? " " : ""}`;
}

/** How many user messages of the tree hold exactly `text` (a queued prompt becomes one). */
export function countUserText(entries, text) {
  let n = 0;
  for (const entry of entries) {
    const message = entry?.type === "message" ? entry.message : null;
    if (message?.role !== "user") continue;
    const content = message.content;
    const body = typeof content === "string" ? content : Array.isArray(content) ? content.filter((b) => b?.type === "text").map((b) => b.text).join("\n") : "";
    if (body === text) n += 1;
  }
  return n;
}

/**
 * The queued messages still waiting: one leaves when the tree holds one more user message
 * with its text than when it was queued (the run took it), all of them when no run is active.
 * `items`: [{id, text, mode, seen}] (`seen`: countUserText when it was queued).
 */
export function stillQueued(items, entries, running) {
  if (!running) return items.length ? [] : items;
  const taken = new Map();
  const left = items.filter((item) => {
    const already = taken.get(item.text) ?? 0;
    const now = countUserText(entries, item.text);
    if (now - item.seen > already) {
      taken.set(item.text, already + 1);
      return false;
    }
    return true;
  });
  return left.length === items.length ? items : left;
}

/** The model a picker choice stands for (the agent's when none was picked or it is gone). */
export function chosenModel(models, choice, agentModel) {
  return models.find((m) => m.name === choice?.model) ?? models.find((m) => m.name === agentModel.name) ?? { ...agentModel };
}

/** What a prompt sends for a picker choice: the model when one was picked and is offered, the level when it thinks. */
export function promptChoice(models, choice, agentModel) {
  const model = chosenModel(models, choice, agentModel);
  const out = {};
  if (choice?.model && model.name === choice.model) out.model = model.name;
  if (model.supportsThinking && choice?.thinkingLevel) out.thinkingLevel = choice.thinkingLevel;
  return out;
}
