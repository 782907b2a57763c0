// Markdown marks out of one-line texts (tree rows, banners, titles): `~~strike~~`,
// `[link](url)`, `**bold**`, headings, list and quote markers read badly in one line.
// Pure (node-tested): no DOM, no markdown parser (a row's text must be cheap).

const RULES = [
  [/!\[([^\]]*)\]\([^)]*\)/g, "$1"], // images: their alt text
  [/\[([^\]]+)\]\([^)]*\)/g, "$1"], // links: their text
  [/\[([^\]]+)\]\[[^\]]*\]/g, "$1"], // reference links
  [/<\/?[a-zA-Z][^>]*>/g, ""], // inline HTML tags
  [/^\s{0,3}#{1,6}\s+/gm, ""], // headings
  [/^\s{0,3}>\s?/gm, ""], // block quotes
  [/^\s*(?:[-*+]|\d+[.)])\s+\[[ xX]\]\s+/gm, ""], // task list items
  [/^\s*(?:[-*+]|\d+[.)])\s+/gm, ""], // list markers
  [/^\s*(?:```|~~~).*$/gm, ""], // code fences
  [/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, "$2"], // bold
  [/(~~)(?=\S)([\s\S]*?\S)\1/g, "$2"], // strike-through
  [/(^|[^\w*])\*(?=\S)([^*\n]*?\S)\*(?!\w)/g, "$1$2"], // *italic*
  [/(^|[^\w_])_(?=\S)([^_\n]*?\S)_(?!\w)/g, "$1$2"], // _italic_
  [/`+([^`]+)`+/g, "$1"], // code spans
];

const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$|^\s*\|\s*:?-+:?\s*\|\s*$/;

/** Table rows as their cells ("a · b"), the rule under a table's head gone. */
function tables(text) {
  if (!text.includes("|")) return text;
  return text
    .split("\n")
    .filter((line) => !TABLE_RULE.test(line))
    .map((line) => (/^\s*\|.*\|\s*$/.test(line) ? line.trim().slice(1, -1).split("|").map((c) => c.trim()).filter(Boolean).join(" · ") : line))
    .join("\n");
}

/** `text` with its markdown marks taken out (the words stay). */
export function plainText(text) {
  let out = tables(String(text ?? ""));
  for (const [pattern, replacement] of RULES) out = out.replace(pattern, replacement);
  return out.replace(/\*\*/g, ""); // a bold mark whose end was cut off
}

const SENTENCE_END = /[.!?。！？…](?=\s|$)|[。！？]/gu;
const WIDE = /[\u2E80-\u9FFF\uAC00-\uD7AF\uF900-\uFAFF\uFF00-\uFFEF\u3040-\u30FF]/u;

/**
 * `text` cut to at most `max` characters where it reads well: whole when it fits; else its
 * first sentence when that fits; else at the last word boundary (a space) with "…"; text
 * without spaces (Chinese, Japanese) at a character boundary — never inside a character
 * (surrogate pairs and combining marks stay whole).
 */
export function cutText(text, max) {
  const chars = graphemes(text);
  if (chars.length <= max) return text;
  const head = chars.slice(0, max).join("");
  let sentence = -1;
  for (const m of head.matchAll(SENTENCE_END)) sentence = m.index + m[0].length;
  if (sentence >= Math.min(12, max / 3)) return head.slice(0, sentence).trim();
  const room = chars.slice(0, max - 1).join("");
  const space = room.lastIndexOf(" ");
  if (space >= room.length / 2 && !WIDE.test(room.slice(space))) return `${room.slice(0, space).replace(/[\s,;:\-–—]+$/u, "")}…`;
  return `${room}…`;
}

const segmenter = typeof Intl !== "undefined" && Intl.Segmenter ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;

function graphemes(text) {
  if (segmenter) return Array.from(segmenter.segment(text), (s) => s.segment);
  return Array.from(text);
}
