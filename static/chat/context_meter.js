// The status bar's token figure (pure, node-tested).
//
// The last run's figure (`session_context_stats`) and the server's estimate both
// start from the usage the model reported with the last answer — which, right after
// a compaction, still counts the context from before it. So when the active path's
// newest compaction comes after its last answer, the figure is estimated here from
// what the next request will hold: the summary and the kept entries (Pi's rough
// rule, four characters a token; an image counts 1200), and marked approximate.

const IMAGE_TOKENS = 1200;

function blockChars(block) {
  if (!block || typeof block !== "object") return 0;
  if (block.type === "text") return String(block.text ?? "").length;
  if (block.type === "thinking") return String(block.thinking ?? "").length;
  if (block.type === "toolCall") return String(block.name ?? "").length + JSON.stringify(block.arguments ?? {}).length;
  if (block.type === "image") return IMAGE_TOKENS * 4;
  return 0;
}

export function entryTokens(entry) {
  let chars = 0;
  if (entry?.type === "message") {
    const content = entry.message?.content;
    if (typeof content === "string") chars = content.length;
    else if (Array.isArray(content)) for (const block of content) chars += blockChars(block);
    if (entry.message?.role === "bashExecution") chars += String(entry.message.command ?? "").length + String(entry.message.output ?? "").length;
  } else if (entry?.type === "compaction" || entry?.type === "branch_summary") {
    chars = String(entry.summary ?? "").length;
  } else if (entry?.type === "custom_message") {
    const content = entry.content;
    chars = typeof content === "string" ? content.length : Array.isArray(content) ? content.reduce((n, b) => n + blockChars(b), 0) : 0;
  }
  return Math.ceil(chars / 4);
}

/** {tokens, approximate} for the meter. */
export function meterTokens(snapshot, lookup, stats) {
  const context = snapshot?.runtimeContext ?? {};
  const path = Array.isArray(snapshot?.activePath) ? snapshot.activePath : [];
  for (let i = path.length - 1; i >= 0; i--) {
    const entry = lookup(path[i]);
    if (entry?.type === "message" && entry.message?.role === "assistant" && entry.message.usage) break; // usage after the last compaction: trust it
    if (entry?.type === "compaction") {
      const first = path.indexOf(entry.firstKeptEntryId);
      let tokens = entryTokens(entry);
      const from = first >= 0 && first < i ? first : i + 1;
      for (let j = from; j < path.length; j++) {
        if (j !== i) tokens += entryTokens(lookup(path[j]));
      }
      return { tokens, approximate: true };
    }
  }
  return { tokens: stats?.tokens || context.tokenEstimate || 0, approximate: false };
}
