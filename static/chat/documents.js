// Documents in a prompt (pure, node-tested): a file's text travels in the user message as
// a text block with a document wrapper (the server writes it, runtime/runs/documents.py):
//
//   <document name="notes.md" type="text/markdown" chars="1234">
//   …the text…
//   </document>
//
// so Pi and every model read it as text, and this page shows it as a file chip.

const HEAD = /^<document name="([^"]*)" type="([^"]*)"((?: [a-z]+="[^"]*")*)>\n/;
const TAIL = "\n</document>";

function unescape(value) {
  return value.replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/** The document a text block holds ({name, type, chars, pages, text}), or null. */
export function documentOf(block) {
  if (block?.type !== "text" || typeof block.text !== "string" || !block.text.endsWith(TAIL)) return null;
  const match = HEAD.exec(block.text);
  if (!match) return null;
  const attrs = {};
  for (const [, key, value] of match[3].matchAll(/ ([a-z]+)="([^"]*)"/g)) attrs[key] = unescape(value);
  const text = block.text.slice(match[0].length, block.text.length - TAIL.length);
  return { name: unescape(match[1]), type: unescape(match[2]), chars: Number(attrs.chars) || text.length, pages: attrs.pages ? Number(attrs.pages) : null, text };
}

/** A user message's content as {text (what was typed), documents}. */
export function splitDocuments(content) {
  if (typeof content === "string") return { text: content, documents: [] };
  const texts = [];
  const documents = [];
  for (const block of Array.isArray(content) ? content : []) {
    const doc = documentOf(block);
    if (doc) documents.push(doc);
    else if (block?.type === "text" && typeof block.text === "string") texts.push(block.text);
  }
  return { text: texts.join("\n"), documents };
}

// What the composer takes as a document (by type, else by name), and the limits the server
// checks again (docs/chat.md, "Documents").
export const DOCUMENT_MAX_BYTES = 10 * 1024 * 1024;
export const DOCUMENTS_MAX = 8;
const TEXT_NAMES = /\.(txt|md|markdown|rst|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|conf|log|xml|html?|css|scss|js|mjs|cjs|ts|tsx|jsx|py|rb|go|rs|java|kt|c|h|cc|cpp|hpp|cs|php|sh|bash|zsh|sql|swift|r|lua|pl|ex|exs|hs|scala|dart|vue|svelte|tex|diff|patch)$/i;

/** Whether a file (by its type and name) is taken as a document: PDF, text, markdown, code. */
export function isDocumentFile(file) {
  const type = file?.type ?? "";
  if (type === "application/pdf" || /\.pdf$/i.test(file?.name ?? "")) return true;
  if (type.startsWith("text/") || ["application/json", "application/xml", "application/x-yaml", "application/javascript", "application/x-sh"].includes(type)) return true;
  return TEXT_NAMES.test(file?.name ?? "") || /^(Makefile|Dockerfile|README|LICENSE)$/.test(file?.name ?? "");
}

export function formatBytes(n) {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} B`;
}
