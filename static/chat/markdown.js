// Markdown to sanitized HTML (marked + DOMPurify), code highlighted with highlight.js.

import DOMPurify from "dompurify";
import { Marked } from "marked";
import { mathExtensions } from "./math.js";
import hljs from "highlight/core.min.js";

// highlight.js languages load on demand: the first code block (or tool output) in a
// language asks for its module (the import map names each file, hashed and cached).
const LANGUAGE_FILES = ["bash", "c", "cpp", "css", "diff", "dockerfile", "go", "ini", "java", "javascript", "json", "makefile", "markdown", "plaintext", "python", "rust", "shell", "sql", "typescript", "xml", "yaml"];
const ALIASES = { sh: "bash", zsh: "bash", console: "bash", js: "javascript", mjs: "javascript", jsx: "javascript", ts: "typescript", tsx: "typescript", py: "python", html: "xml", svg: "xml", yml: "yaml", toml: "ini", text: "plaintext", txt: "plaintext" };
const loading = new Map(); // language file -> Promise<boolean>

/** The language file a code block's language names (null: one this page does not highlight). */
export function languageFile(name) {
  const key = String(name ?? "").toLowerCase();
  const file = ALIASES[key] ?? key;
  return LANGUAGE_FILES.includes(file) ? file : null;
}

/** Whether `name` can be highlighted now (its module is loaded). */
export function languageReady(name) {
  const file = languageFile(name);
  return file !== null && Boolean(hljs.getLanguage(file));
}

/** Load the language `name` names; resolves true once it can be highlighted. */
export function loadLanguage(name) {
  const file = languageFile(name);
  if (file === null) return Promise.resolve(false);
  if (hljs.getLanguage(file)) return Promise.resolve(true);
  if (!loading.has(file)) {
    loading.set(file, import(`highlight/languages/${file}.min.js`).then(
      (module) => {
        hljs.registerLanguage(file, module.default ?? module);
        const aliases = Object.entries(ALIASES).filter(([, target]) => target === file).map(([alias]) => alias);
        if (aliases.length) hljs.registerAliases(aliases, { languageName: file });
        return true;
      },
      (error) => {
        console.warn(`neta: highlight.js could not load ${file}`, error);
        return false;
      },
    ));
  }
  return loading.get(file);
}

const marked = new Marked({ gfm: true, breaks: false, async: false });
marked.use({ extensions: mathExtensions }); // before markdown can eat TeX's backslashes (math.js)

// Task lists keep their (disabled) checkboxes; no other input gets through.
DOMPurify.addHook("uponSanitizeElement", (node, data) => {
  if (data.tagName === "input" && !(node.getAttribute("type") === "checkbox" && node.parentElement?.tagName === "LI")) node.remove();
});
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "INPUT") {
    node.parentElement?.classList.add("task-item");
    node.setAttribute("disabled", "");
    node.setAttribute("aria-label", node.hasAttribute("checked") ? "done" : "not done");
  }
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const CACHE_LIMIT = 400;
const cache = new Map();

/** Sanitized HTML for markdown `text` (cached: finished messages never change). */
export function renderMarkdown(text, { cacheable = true } = {}) {
  if (cacheable && cache.has(text)) return cache.get(text);
  const html = DOMPurify.sanitize(marked.parse(text ?? ""), { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "button"] });
  if (cacheable) {
    cache.set(text, html);
    if (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value);
  }
  return html;
}

const EXTENSIONS = { py: "python", js: "javascript", mjs: "javascript", ts: "typescript", tsx: "typescript", json: "json", sh: "bash", bash: "bash", md: "markdown", yml: "yaml", yaml: "yaml", toml: "ini", ini: "ini", css: "css", html: "xml", xml: "xml", sql: "sql", go: "go", rs: "rust", java: "java", c: "c", h: "c", cpp: "cpp", hpp: "cpp", diff: "diff", patch: "diff" };

export function languageForPath(path) {
  const name = String(path ?? "").split("/").pop() ?? "";
  if (name === "Dockerfile") return "dockerfile";
  if (name === "Makefile") return "makefile";
  return EXTENSIONS[name.split(".").pop()?.toLowerCase()] ?? null;
}

/** Highlight the code blocks inside `element` whose language is known (no guessing: it is
 * slow); a language not loaded yet is loaded first. */
export function highlightWithin(element) {
  if (!element) return;
  for (const code of element.querySelectorAll("pre code")) {
    if (code.dataset.highlighted) continue;
    const match = /(?:^|\s)language-([\w+-]+)/.exec(code.className);
    if (!match || languageFile(match[1]) === null || code.textContent.length >= 200_000) continue;
    const language = languageFile(match[1]);
    if (hljs.getLanguage(language)) {
      code.classList.add(`language-${language}`);
      hljs.highlightElement(code);
    } else {
      loadLanguage(language).then((ok) => {
        if (ok && code.isConnected && !code.dataset.highlighted) {
          code.classList.add(`language-${language}`);
          hljs.highlightElement(code);
        }
      });
    }
  }
}

/** Highlighted HTML for plain code in a loaded language (tool output, file contents), else
 * null (see languageReady / loadLanguage). */
export function highlightCode(text, language) {
  const file = languageFile(language);
  if (!file || !hljs.getLanguage(file) || text.length > 200_000) return null;
  return hljs.highlight(text, { language: file, ignoreIllegals: true }).value;
}
