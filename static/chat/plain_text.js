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

/** `text` with its markdown marks taken out (the words stay). */
export function plainText(text) {
  let out = String(text ?? "");
  for (const [pattern, replacement] of RULES) out = out.replace(pattern, replacement);
  return out;
}
