// The self-contained HTML page of a conversation (the chat page's *Download → HTML page*):
// the Markdown export (GET /api/sessions/<id>/export/?format=markdown) rendered by the page's
// own markdown (sanitized), inside one HTML file with its stylesheet inlined: it opens
// anywhere, offline, with no script.

import { renderMarkdown } from "./markdown.js";

const STYLE = `
  body { font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1f23; background: #f7f7f8; margin: 0; }
  main { max-width: 820px; margin: 0 auto; padding: 24px 20px 64px; background: #fff; }
  h1 { font-size: 1.6em; margin: 0 0 4px; } h2 { font-size: 1.05em; margin: 28px 0 8px; padding-top: 10px; border-top: 1px solid #dfe1e6; color: #3451c6; }
  pre { background: #f4f5f7; border: 1px solid #dfe1e6; border-radius: 8px; padding: 10px 12px; overflow-x: auto; font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; }
  code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; } :not(pre) > code { background: #f4f5f7; padding: 1px 5px; border-radius: 4px; }
  table { border-collapse: collapse; display: block; overflow-x: auto; } th, td { border: 1px solid #dfe1e6; padding: 4px 8px; }
  blockquote { margin: 8px 0; padding-left: 12px; border-left: 3px solid #dfe1e6; color: #50566a; }
  details { margin: 6px 0; border-left: 3px solid #dfe1e6; padding-left: 10px; } summary { cursor: pointer; color: #50566a; }
  img { max-width: 100%; } a { color: #3451c6; }
  @media (prefers-color-scheme: dark) { body { background: #15171b; color: #e4e6eb; } main { background: #1c1f24; } pre, :not(pre) > code { background: #111317; border-color: #2f343c; }
    h2 { border-color: #2f343c; color: #91a7ff; } th, td { border-color: #2f343c; } blockquote, summary { color: #b3b8c4; } a { color: #91a7ff; } }
`;

function escapeHtml(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** One HTML document (a string) for the conversation `markdown` called `title`. */
export function htmlPage(title, markdown) {
  const body = renderMarkdown(markdown, { cacheable: false });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** Hand `text` to the browser as a download called `name`. */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A file name from a title: letters, digits, dashes. */
export function fileName(title, extension) {
  const base = String(title || "conversation").normalize("NFKD").replace(/[^\w\s-]/g, "").trim().replace(/\s+/g, "-").slice(0, 60) || "conversation";
  return `${base}.${extension}`;
}
