// Markdown to sanitized HTML (marked + DOMPurify), code highlighted with highlight.js.

import DOMPurify from "dompurify";
import { Marked } from "marked";
import { mathExtensions } from "./math.js";
import hljs from "highlight/core.min.js";
import bash from "highlight/languages/bash.min.js";
import c from "highlight/languages/c.min.js";
import cpp from "highlight/languages/cpp.min.js";
import css from "highlight/languages/css.min.js";
import diff from "highlight/languages/diff.min.js";
import dockerfile from "highlight/languages/dockerfile.min.js";
import go from "highlight/languages/go.min.js";
import ini from "highlight/languages/ini.min.js";
import java from "highlight/languages/java.min.js";
import javascript from "highlight/languages/javascript.min.js";
import json from "highlight/languages/json.min.js";
import makefile from "highlight/languages/makefile.min.js";
import markdown from "highlight/languages/markdown.min.js";
import plaintext from "highlight/languages/plaintext.min.js";
import python from "highlight/languages/python.min.js";
import rust from "highlight/languages/rust.min.js";
import shell from "highlight/languages/shell.min.js";
import sql from "highlight/languages/sql.min.js";
import typescript from "highlight/languages/typescript.min.js";
import xml from "highlight/languages/xml.min.js";
import yaml from "highlight/languages/yaml.min.js";

const LANGUAGES = { bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, makefile, markdown, plaintext, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);
hljs.registerAliases(["sh", "zsh", "console"], { languageName: "bash" });
hljs.registerAliases(["js", "mjs", "jsx"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["yml"], { languageName: "yaml" });
hljs.registerAliases(["toml"], { languageName: "ini" });
hljs.registerAliases(["text", "txt"], { languageName: "plaintext" });

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

/** Highlight the code blocks inside `element` whose language is known (no guessing: it is slow). */
export function highlightWithin(element) {
  if (!element) return;
  for (const code of element.querySelectorAll("pre code")) {
    if (code.dataset.highlighted) continue;
    const match = /(?:^|\s)language-([\w+-]+)/.exec(code.className);
    if (match && hljs.getLanguage(match[1]) && code.textContent.length < 200_000) hljs.highlightElement(code);
  }
}

/** Highlighted HTML for plain code in a known language (tool output, file contents). */
export function highlightCode(text, language) {
  if (!language || !hljs.getLanguage(language) || text.length > 200_000) return null;
  return hljs.highlight(text, { language, ignoreIllegals: true }).value;
}
