// Tool call + result cards, through a renderer registry keyed by tool name.
//
// A renderer is {summary(args) -> string, Body({call, args, result, output, running})}.
// Unknown tools get the generic renderer (arguments as JSON, output as text).

import { Component } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { highlightCode, languageForPath, languageReady, loadLanguage } from "../markdown.js";
import { contentText } from "../tree_model.js";
import { useStore } from "./hooks.js";
import { stateToken } from "../state_tokens.js";
import { safeHttpUrl, searchResults } from "../web_results.js";
import { t, tn } from "../i18n.js";

const renderers = new Map();

export function registerToolRenderer(name, renderer) {
  renderers.set(name, renderer);
}

export function rendererFor(name) {
  return renderers.get(name) ?? GENERIC;
}

function resultText(result) {
  return contentText(result?.message?.content);
}

function parsedArgs(call) {
  if (call.arguments && typeof call.arguments === "object" && Object.keys(call.arguments).length) return call.arguments;
  if (typeof call.argsText === "string" && call.argsText) {
    try {
      return JSON.parse(call.argsText);
    } catch {
      return null;
    }
  }
  return call.arguments ?? {};
}

function Output({ text, language = null, className = "" }) {
  // A language not loaded yet: drawn plain, then highlighted once its module is there.
  const [, loaded] = useState(false);
  useEffect(() => {
    if (language && !languageReady(language)) loadLanguage(language).then((ok) => ok && loaded(true));
  }, [language]);
  const highlighted = language ? highlightCode(text, language) : null;
  if (highlighted !== null) return html`<pre class=${`tool-output ${className}`}><code class="hljs" dangerouslySetInnerHTML=${{ __html: highlighted }}></code></pre>`;
  return html`<pre class=${`tool-output ${className}`}><code>${text}</code></pre>`;
}

function ResultImages({ result }) {
  const blocks = Array.isArray(result?.message?.content) ? result.message.content : [];
  return blocks
    .filter((b) => b?.type === "image" && typeof b.data === "string")
    .map((b, i) => html`<img key=${i} class="tool-image" alt=${t("image returned by the tool")} src=${`data:${b.mimeType};base64,${b.data}`} />`);
}

const GENERIC = {
  summary: (args) => {
    const text = args ? JSON.stringify(args) : "";
    return text.length > 80 ? `${text.slice(0, 79)}…` : text;
  },
  Body: ({ call, args, result, output }) => html`
    <div class="tool-section-label">${t("Arguments")}</div>
    <${Output} text=${args ? JSON.stringify(args, null, 2) : call.argsText ?? ""} language="json" />
    ${result || output ? html`<div class="tool-section-label">${t("Result")}</div><${Output} text=${result ? resultText(result) : output.text} /><${ResultImages} result=${result} />` : null}
  `,
};

// The summary line shows a short one-line command whole: the body repeats only a longer one.
const SHORT_COMMAND = 72;

registerToolRenderer("bash", {
  summary: (args) => (args?.command ? `$ ${args.command.split("\n")[0]}` : ""),
  Body: ({ args, result, output }) => html`
    ${args?.command && (args.command.includes("\n") || args.command.length > SHORT_COMMAND) ? html`<${Output} text=${`$ ${args.command}`} language="bash" className="command" />` : null}
    ${result || output ? html`<${Output} text=${result ? resultText(result) : output.text} className="terminal" />` : null}
  `,
});

registerToolRenderer("read", {
  summary: (args) => [args?.path, args?.offset ? t("from line {n}", { n: args.offset }) : null].filter(Boolean).join(" "),
  Body: ({ args, result, output }) => {
    if (!result && !output) return null;
    return html`<${Output} text=${result ? resultText(result) : output.text} language=${languageForPath(args?.path)} /><${ResultImages} result=${result} />`;
  },
});

registerToolRenderer("write", {
  summary: (args) => `${args?.path ?? ""}${typeof args?.content === "string" ? ` (${tn("{n} line", "{n} lines", args.content.split("\n").length)})` : ""}`,
  Body: ({ args, result }) => html`
    ${typeof args?.content === "string" ? html`<${Output} text=${args.content} language=${languageForPath(args?.path)} />` : null}
    ${result ? html`<div class="tool-note">${resultText(result)}</div>` : null}
  `,
});

function Diff({ text }) {
  const lines = text.split("\n");
  return html`<pre class="tool-output diff">${lines.map((line, i) => {
    const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    return html`<span key=${i} class=${`diff-${kind}`}>${line}${"\n"}</span>`;
  })}</pre>`;
}

registerToolRenderer("edit", {
  summary: (args) => `${args?.path ?? ""}${Array.isArray(args?.edits) ? ` (${tn("{n} edit", "{n} edits", args.edits.length)})` : ""}`,
  Body: ({ args, result }) => {
    const diff = result?.message?.details?.diff;
    if (typeof diff === "string" && diff) return html`<${Diff} text=${diff} />`;
    const edits = Array.isArray(args?.edits) ? args.edits : [];
    return html`
      ${edits.map((e, i) => html`<${Diff} key=${i} text=${[...String(e.oldText ?? "").split("\n").map((l) => `-${l}`), ...String(e.newText ?? "").split("\n").map((l) => `+${l}`)].join("\n")} />`)}
      ${result ? html`<div class="tool-note">${resultText(result)}</div>` : null}
    `;
  },
});

for (const name of ["ls", "find", "grep"]) {
  registerToolRenderer(name, {
    summary: (args) => [args?.pattern, args?.path].filter(Boolean).join(" in "),
    Body: ({ result, output }) => (result || output ? html`<${Output} text=${result ? resultText(result) : output.text} />` : null),
  });
}

registerToolRenderer("web_search", {
  summary: (args) => [args?.query, args?.site ? `site:${args.site}` : null, args?.recency ? t("past {period}", { period: args.recency }) : null].filter(Boolean).join(" · "),
  Body: ({ result }) => {
    if (!result) return null;
    const results = result.message?.isError ? [] : searchResults(result.message?.details);
    if (!results.length) return html`<div class="tool-note">${resultText(result)}</div>`;
    return html`<ol class="web-results">${results.map((r, i) => html`
      <li key=${i}>
        ${r.url ? html`<a href=${r.url} target="_blank" rel="noopener noreferrer nofollow">${r.title}</a>` : html`<span>${r.title}</span>`}
        <div class="web-result-url">${r.url ?? ""}</div>
        ${r.snippet ? html`<div class="web-result-snippet">${r.snippet}</div>` : null}
      </li>`)}</ol>`;
  },
});

registerToolRenderer("web_fetch", {
  summary: (args) => args?.url ?? "",
  Body: ({ args, result }) => {
    if (!result) return null;
    // A link only to a page that was fetched: never to a refused (internal) address.
    const url = result.message?.isError ? null : safeHttpUrl(result.message?.details?.finalUrl ?? args?.url);
    return html`
      ${url ? html`<div class="tool-note"><a href=${url} target="_blank" rel="noopener noreferrer nofollow">${url}</a></div>` : null}
      <${Output} text=${resultText(result)} className="wrap" />
    `;
  },
});

/** Streamed output of a tool that is still running (the only part that re-renders). */
function LiveOutput({ store, callId, children }) {
  useStore(store, ["tools"]);
  const output = store.toolOutputs.get(callId) ?? null;
  return children(output);
}

/** An open call's status: running, or — while the run waits for a person (an approval) — waiting. */
function RunningStatus({ store }) {
  useStore(store, ["run"]);
  const waiting = store.run.state === "waiting";
  const status = waiting ? "waiting" : "running";
  return html`<span class=${`tool-status status-${status}`} aria-label=${`status: ${status}`}>${waiting ? "waiting for you" : "running…"}</span>`;
}

export class ToolCard extends Component {
  shouldComponentUpdate(next) {
    return next.call !== this.props.call || next.result !== this.props.result || next.streaming !== this.props.streaming;
  }

  render({ call, result, store, streaming }) {
    const renderer = rendererFor(call.name);
    const args = parsedArgs(call);
    const isError = Boolean(result?.message?.isError);
    const own = result && renderer.status ? renderer.status(result) : null;
    const status = result ? own ?? (isError ? "error" : "done") : streaming ? "calling" : renderer.pendingStatus ?? "running";
    const body = (output) => html`<${renderer.Body} call=${call} args=${args} result=${result} output=${output} running=${!result} />`;
    return html`
      <details class=${`tool-card tool-${status} state-${stateToken(status)}`} open=${!result || status === "error"} data-tool=${call.name} data-call-id=${call.id}>
        <summary>
          <span class="tool-name">${call.name || "tool"}</span>
          <span class="tool-summary">${renderer.summary(args ?? {})}</span>
          ${status === "running" && store
            ? html`<${RunningStatus} store=${store} />`
            : html`<span class=${`tool-status status-${status}`} aria-label=${t("status: {status}", { status })}>${{ done: "✓", error: `✗ ${t("error")}`, running: t("running…"), calling: "…", waiting: t("waiting for you"), partial: `◐ ${t("partial")}`, cancelled: t("cancelled") }[status]}</span>`}
        </summary>
        <div class="tool-body">
          ${result || !store ? body(null) : html`<${LiveOutput} store=${store} callId=${call.id}>${(output) => body(output)}</${LiveOutput}>`}
        </div>
      </details>
    `;
  }
}
