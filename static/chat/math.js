// Math in markdown: where TeX starts and ends (pure, node-tested), and the marked
// extension that keeps it away from markdown (which would eat its backslashes: `\,`
// is an escaped comma to markdown). KaTeX itself is loaded only when a message has
// math (`typesetWithin`), so pages without math never pay for it.
//
// Delimiters: inline `$…$` and `\(…\)`, display `$$…$$` and `\[…\]`. A `$` opens
// only when the next character is not a space and closes only when the one before
// is not a space and the one after is not a digit ("$5 and $10" stays text); `\$`
// is a dollar sign; math never spans a blank line.

/** Display math at the start of `src`: {raw, tex, display: true} or null. */
export function matchDisplayMath(src) {
  let m = /^\$\$([\s\S]+?)\$\$/.exec(src);
  if (!m) m = /^\\\[([\s\S]+?)\\\]/.exec(src);
  if (!m || /\n\s*\n/.test(m[1]) || !m[1].trim()) return null;
  return { raw: m[0], tex: m[1].trim(), display: true };
}

/** Inline math at the start of `src`: {raw, tex, display: false} or null (display math too). */
export function matchInlineMath(src) {
  if (src.startsWith("$$") || src.startsWith("\\[")) return matchDisplayMath(src);
  if (src.startsWith("\\(")) {
    const end = src.indexOf("\\)", 2);
    if (end < 0) return null;
    const tex = src.slice(2, end);
    if (!tex.trim() || /\n\s*\n/.test(tex)) return null;
    return { raw: src.slice(0, end + 2), tex: tex.trim(), display: false };
  }
  if (src[0] !== "$" || src.length < 3 || /\s/.test(src[1])) return null;
  for (let i = 1; i < src.length; i++) {
    const ch = src[i];
    if (ch === "\\") {
      i += 1; // an escaped character (\$ inside math) never closes it
      continue;
    }
    if (ch === "\n" && src[i + 1] === "\n") return null;
    if (ch !== "$") continue;
    if (/\s/.test(src[i - 1]) || /\d/.test(src[i + 1] ?? "")) return null;
    return { raw: src.slice(0, i + 1), tex: src.slice(1, i), display: false };
  }
  return null;
}

/** Where math may start in `src` (for marked's inline text tokenizer), or undefined. */
export function mathStart(src) {
  const m = /\$|\\\(|\\\[/.exec(src);
  if (!m) return undefined;
  // An escaped dollar (\$) is markdown's business, not a start.
  if (m[0] === "$" && m.index > 0 && src[m.index - 1] === "\\") {
    const rest = mathStart(src.slice(m.index + 1));
    return rest === undefined ? undefined : m.index + 1 + rest;
  }
  return m.index;
}

/** The math pieces of `text`, in order (for tests and for the plain-text copy of a message). */
export function findMath(text) {
  const found = [];
  let i = 0;
  while (i < text.length) {
    const at = mathStart(text.slice(i));
    if (at === undefined) break;
    const match = matchInlineMath(text.slice(i + at));
    if (match) {
      found.push({ ...match, index: i + at });
      i += at + match.raw.length;
    } else {
      i += at + 1;
    }
  }
  return found;
}

function escapeAttribute(text) {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function escapeText(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The placeholder the sanitizer lets through; `typesetWithin` replaces it with KaTeX. */
export function mathPlaceholder(tex, display) {
  const tag = display ? "div" : "span";
  return `<${tag} class="math math-${display ? "display" : "inline"}" data-tex="${escapeAttribute(tex)}">${escapeText(display ? `$$${tex}$$` : `$${tex}$`)}</${tag}>`;
}

/** marked extensions: block `$$…$$`/`\[…\]` on their own lines, inline everything else. */
export const mathExtensions = [
  {
    name: "mathBlock",
    level: "block",
    start: (src) => {
      const m = /^ {0,3}(?:\$\$|\\\[)/m.exec(src);
      return m ? m.index : undefined;
    },
    tokenizer(src) {
      const lead = /^ {0,3}/.exec(src)[0];
      const match = matchDisplayMath(src.slice(lead.length));
      if (!match) return undefined;
      const after = src.slice(lead.length + match.raw.length);
      const line = /^[ \t]*(?:\n|$)/.exec(after);
      if (!line) return undefined; // text after the closing delimiter: inline math in a paragraph
      return { type: "mathBlock", raw: src.slice(0, lead.length + match.raw.length + line[0].length), tex: match.tex };
    },
    renderer: (token) => `${mathPlaceholder(token.tex, true)}\n`,
  },
  {
    name: "mathInline",
    level: "inline",
    start: mathStart,
    tokenizer(src) {
      const match = matchInlineMath(src);
      if (!match) return undefined;
      return { type: "mathInline", raw: match.raw, tex: match.tex, display: match.display };
    },
    renderer: (token) => mathPlaceholder(token.tex, token.display),
  },
];
