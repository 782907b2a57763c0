// KaTeX for the math placeholders markdown.js leaves (math.js). Loaded on first use:
// the module, its stylesheet and fonts cost nothing on pages without math.
//
// KaTeX runs with `trust: false` (no \href, \url, \includegraphics, no HTML
// extensions) and a bounded macro expansion, and its output goes through DOMPurify
// once more before it reaches the page.

import DOMPurify from "dompurify";

let loading = null;

function load() {
  if (!loading) {
    loading = import("katex").then((module) => {
      const href = import.meta.resolve("katex/katex.min.css"); // the import map names it (hashed when collected)
      if (!document.querySelector("link[data-katex]")) {
        const link = document.createElement("link");
        link.rel = "stylesheet";
        link.href = href;
        link.dataset.katex = "";
        document.head.append(link);
      }
      return module.default ?? module;
    });
  }
  return loading;
}

const cache = new Map();
const CACHE_LIMIT = 500;

function typesetOne(katex, tex, display) {
  const key = `${display ? "D" : "I"}${tex}`;
  let out = cache.get(key);
  if (out === undefined) {
    const raw = katex.renderToString(tex, { displayMode: display, throwOnError: false, trust: false, strict: "ignore", maxExpand: 1000, output: "htmlAndMathml" });
    out = DOMPurify.sanitize(raw, { USE_PROFILES: { html: true, svg: true, mathMl: true } });
    cache.set(key, out);
    if (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value);
  }
  return out;
}

/** Replace the math placeholders inside `element` with typeset math. */
export async function typesetWithin(element) {
  if (!element) return;
  const pending = element.querySelectorAll(".math[data-tex]:not([data-typeset])");
  if (pending.length === 0) return;
  let katex;
  try {
    katex = await load();
  } catch (error) {
    console.warn("neta: KaTeX could not be loaded; math stays as TeX", error);
    return;
  }
  for (const node of pending) {
    if (!node.isConnected || node.dataset.typeset) continue;
    const tex = node.dataset.tex;
    node.innerHTML = typesetOne(katex, tex, node.classList.contains("math-display"));
    node.dataset.typeset = "";
    node.setAttribute("title", tex);
  }
}
