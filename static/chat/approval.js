// The call a waiting run waits on for approval (docs/tools.md, "Approvals"): the first tool
// call of the leaf's assistant message without a result, when it is not a question (an
// `ask_user` call is the question panel's). Pure: reads the snapshot through `lookup`.

import { openCalls } from "./plan.js";

export function openApproval(snapshot, lookup) {
  const open = openCalls(snapshot, lookup);
  if (!open?.calls.length || open.calls.some((b) => b.name === "ask_user")) return null;
  const call = open.calls[0];
  const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
  return { toolCallId: call.id, tool: String(call.name ?? ""), args, command: typeof args.command === "string" ? args.command : "", entryId: open.entry.id, waiting: open.calls.length };
}

/** The first word of a command, as the prefix "allow for this session" offers by default. */
export function commandPrefix(command) {
  const words = String(command ?? "").trim().split(/\s+/);
  return words[0] ? `${words[0]} ` : "";
}
