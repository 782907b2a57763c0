// The call a waiting run waits on for approval (docs/tools.md, "Approvals"): the first tool
// call of the leaf's assistant message without a result, when it is not a question (an
// `ask_user` call is the question panel's). Pure: reads the snapshot through `lookup`.

export function openApproval(snapshot, lookup) {
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
    const open = blocks.filter((b) => b?.type === "toolCall" && !answered.has(b.id));
    if (!open.length || open.some((b) => b.name === "ask_user")) return null;
    const call = open[0];
    const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
    return { toolCallId: call.id, tool: String(call.name ?? ""), args, command: typeof args.command === "string" ? args.command : "", entryId: entry.id, waiting: open.length };
  }
  return null;
}

/** The first word of a command, as the prefix "allow for this session" offers by default. */
export function commandPrefix(command) {
  const words = String(command ?? "").trim().split(/\s+/);
  return words[0] ? `${words[0]} ` : "";
}
