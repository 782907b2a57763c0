// Conversation components: one visual language for every kind of entry.

import { Component } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { ToolCard } from "./tool_renderers.js";
import { SubagentBatchNode } from "./subagent_panel.js";
import { ActionRetryBar } from "./state_parts.js";
import { highlightWithin, renderMarkdown } from "../markdown.js";
import { contentText } from "../tree_model.js";
import { formatCost, formatTokens } from "../conversation_model.js";
import { blockProblem, entryTypeName, num, text as shown } from "../entry_check.js";
import { EditInPlace, RegenerateButton, VersionSwitcher } from "./versions.js";
import { decorateCodeBlocks } from "./code_block.js";
import { typesetWithin } from "../typeset.js";
import { formatDuration, thinkingMs, thinkingSince } from "../thinking_time.js";

export function Markdown({ text, streaming = false }) {
  const ref = useRef(null);
  const source = text ?? "";
  useEffect(() => {
    if (streaming) return;
    highlightWithin(ref.current);
    decorateCodeBlocks(ref.current);
    typesetWithin(ref.current);
  }, [source, streaming]);
  return html`<div class="markdown" ref=${ref} dangerouslySetInnerHTML=${{ __html: renderMarkdown(source, { cacheable: !streaming }) }}></div>`;
}

export function Thinking({ text, streaming, entryId = null, index = 0 }) {
  const [open, setOpen] = useState(false);
  const took = entryId ? thinkingMs(entryId, index) : null;
  const since = streaming && took === null && entryId ? thinkingSince(entryId, index) : null;
  const label = took !== null ? `Thought for ${formatDuration(took)}` : streaming ? "Thinking…" : "Thinking";
  return html`
    <details class=${`thinking state-${streaming && took === null ? "running" : "done"}`} open=${open} onToggle=${(e) => setOpen(e.currentTarget.open)} data-thinking-ms=${took ?? undefined}>
      <summary>${label}<span class="muted"> · ${since !== null ? `${formatDuration(performance.now() - since)} · ` : ""}${text.length} chars</span></summary>
      ${open ? html`<div class="thinking-text">${text}</div>` : null}
    </details>
  `;
}

function CopyButton({ text, label = "Copy" }) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const area = document.createElement("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    setDone(true);
    setTimeout(() => setDone(false), 1200);
  };
  return html`<button type="button" class="icon-button" onClick=${copy} aria-label=${label} title=${label}>${done ? "Copied" : "Copy"}</button>`;
}

function Usage({ usage, turnUsage }) {
  if (!usage || typeof usage !== "object") return null;
  // Numbers another writer got wrong (a string, NaN) show as "?", not as a broken page.
  const parts = [`↑${formatTokens(usage.input ?? 0)}`, `↓${formatTokens(usage.output ?? 0)}`];
  if (usage.cacheRead) parts.push(`cache ${formatTokens(usage.cacheRead)}`);
  const cost = usage.cost && typeof usage.cost === "object" ? usage.cost.total ?? 0 : usage.cost === undefined ? 0 : null;
  return html`<span class="usage" title="tokens in / out, cost of this message">${parts.join(" ")} · ${formatCost(cost)}${
    turnUsage ? html`<span class="turn-usage" title="the whole turn"> · turn ${formatTokens(turnUsage.input)}/${formatTokens(turnUsage.output)} · ${formatCost(turnUsage.cost)}</span>` : null
  }</span>`;
}

function Label({ label }) {
  return label ? html`<span class="entry-label" title="label"># ${shown(label)}</span>` : null;
}

/** A content block this page cannot draw, marked in place (the rest of the message is drawn). */
export function UnknownBlock({ problem }) {
  return html`<div class="block-unrenderable" data-unrenderable-block="true" role="note">This part of the message could not be shown: ${problem}.</div>`;
}

function badBlocks(content, role) {
  if (!Array.isArray(content)) return [];
  return content.map((block) => blockProblem(block, role)).filter(Boolean);
}

/** What an entry that cannot be drawn shows instead: that it is there, its id and type, and why. */
export function UnrenderableEntry({ id, typeName, problem }) {
  return html`
    <article class="msg msg-unrenderable" data-entry-id=${shown(id)} data-unrenderable="true" role="note" aria-label="An entry that could not be shown">
      <div class="unrenderable-title">This entry could not be shown</div>
      <div class="unrenderable-detail">id <code>${shown(id)}</code> · type <code>${shown(typeName)}</code>${problem ? html` · <span>${shown(problem)}</span>` : null}</div>
    </article>
  `;
}

function images(content) {
  return (Array.isArray(content) ? content : []).filter((b) => b?.type === "image" && typeof b.data === "string");
}

export function UserMessage({ entry, label, actions, store }) {
  const text = contentText(entry.message.content);
  const [editing, setEditing] = useState(false);
  return html`
    <article class="msg msg-user" data-entry-id=${entry.id} aria-label="Your message">
      <div class="msg-body">
        ${editing
          ? html`<${EditInPlace} text=${text} onCancel=${() => setEditing(false)} onSave=${async (value) => {
              const sent = await actions.editSend(entry.id, value);
              if (sent !== false) setEditing(false);
              return sent;
            }} />`
          : html`<div class="user-text">${text}</div>`}
        ${images(entry.message.content).map((b, i) => html`<img key=${i} class="msg-image" alt="attached image" src=${`data:${b.mimeType};base64,${b.data}`} />`)}
        ${badBlocks(entry.message.content, "user").map((problem, i) => html`<${UnknownBlock} key=${`bad${i}`} problem=${problem} />`)}
      </div>
      <footer class="msg-actions">
        ${store ? html`<${VersionSwitcher} entry=${entry} store=${store} actions=${actions} />` : null}
        <${Label} label=${label} />
        <${CopyButton} text=${text} label="Copy message" />
        ${editing ? null : html`<button type="button" class="icon-button" onClick=${() => setEditing(true)} title="Edit this message and send it as a new version">Edit</button>`}
        <button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)} title="Edit this message and send it as a new branch">Continue from here</button>
      </footer>
    </article>
  `;
}

/** The assistant's blocks in order: thinking, text, tool calls. */
export function AssistantBlocks({ message, results = {}, store = null, streaming = false, entryId = null }) {
  const blocks = Array.isArray(message.content) ? message.content : [];
  return blocks.map((block, i) => {
    const problem = streaming ? null : blockProblem(block, "assistant");
    if (problem) return html`<${UnknownBlock} key=${i} problem=${problem} />`;
    if (block?.type === "thinking") return block.thinking ? html`<${Thinking} key=${i} text=${block.thinking} streaming=${streaming} entryId=${entryId} index=${i} />` : null;
    if (block?.type === "text") return block.text ? html`<${Markdown} key=${i} text=${block.text} streaming=${streaming} />` : null;
    if (block?.type === "toolCall") {
      return html`<${ToolCard} key=${block.id ?? i} call=${block} result=${results[block.id] ?? null} store=${store} streaming=${streaming && block.argsText !== undefined} />`;
    }
    return null;
  });
}

export function AssistantMessage({ entry, results, label, actions, store, turnUsage }) {
  const message = entry.message;
  const stop = message.stopReason;
  const text = contentText(message.content);
  const failed = stop === "error" || stop === "aborted";
  return html`
    <article class=${`msg msg-assistant${failed ? ` msg-${stop}` : ""}`} data-entry-id=${entry.id} aria-label="Assistant message">
      <div class="msg-body">
        <${AssistantBlocks} message=${message} results=${results} store=${store} entryId=${entry.id} />
        ${stop === "error"
          ? html`<${ActionRetryBar} status="failed" label="Error" className="msg-error" text=${shown(message.errorMessage) || "the model returned an error"}
              onRetry=${() => actions.retry(entry.id)} retryTitle="Answer the same message again (a new version beside this one)" />`
          : null}
        ${stop === "aborted"
          ? html`<${ActionRetryBar} status="aborted" label="Aborted" className="msg-aborted" text=${message.errorMessage ? shown(message.errorMessage) : "the answer was stopped"}
              onRetry=${() => actions.retry(entry.id)} retryTitle="Answer the same message again (a new version beside this one)" />`
          : null}
        ${stop === "length" ? html`<${ActionRetryBar} status="partial" label="Cut short" className="msg-cut" text="Stopped at the output limit." />` : null}
      </div>
      <footer class="msg-actions">
        ${store ? html`<${VersionSwitcher} entry=${entry} store=${store} actions=${actions} />` : null}
        <span class="model-name" title="model">${shown(message.model)}</span>
        <${Usage} usage=${message.usage} turnUsage=${turnUsage} />
        <${Label} label=${label} />
        ${text ? html`<${CopyButton} text=${text} label="Copy answer" />` : null}
        ${failed ? null : html`<${RegenerateButton} entry=${entry} actions=${actions} />`}
        <button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)} title="Move the leaf here: the next prompt continues from this message">Continue from here</button>
      </footer>
    </article>
  `;
}

function SummaryNode({ entry, title, detail, label, actions, className }) {
  return html`
    <article class=${`msg msg-node ${className}`} data-entry-id=${entry.id} aria-label=${title}>
      <details class="node-details">
        <summary><span class="node-title">${title}</span>${detail ? html`<span class="muted"> · ${detail}</span>` : null}</summary>
        <${Markdown} text=${entry.summary ?? ""} />
      </details>
      <footer class="msg-actions">
        <${Label} label=${label} />
        <button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)}>Continue from here</button>
      </footer>
    </article>
  `;
}

export function CompactionNode(props) {
  const tokens = num(props.entry.tokensBefore);
  return html`<${SummaryNode} ...${props} title="Context compacted" detail=${tokens !== null ? `${formatTokens(tokens)} tokens before` : null} className="msg-compaction" />`;
}

export function BranchSummaryNode(props) {
  return html`<${SummaryNode} ...${props} title="Branch summary" detail="what happened on the branch that was left" className="msg-branch-summary" />`;
}

export function CustomMessageNode({ entry, label, actions }) {
  const content = entry.content ?? entry.message?.content;
  const kind = shown(entry.customType ?? entry.message?.customType ?? "custom");
  return html`
    <article class="msg msg-node msg-custom" data-entry-id=${entry.id} aria-label=${`Custom message: ${kind}`}>
      <div class="node-title">✉ ${kind}</div>
      <${Markdown} text=${contentText(content)} />
      <footer class="msg-actions"><${Label} label=${label} /><button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)}>Continue from here</button></footer>
    </article>
  `;
}

export function BashNode({ entry, label }) {
  const m = entry.message;
  return html`
    <article class="msg msg-node msg-bash" data-entry-id=${entry.id} aria-label="Shell command">
      <pre class="tool-output terminal"><code>$ ${shown(m.command)}${"\n"}${shown(m.output)}</code></pre>
      <footer class="msg-actions"><${Label} label=${label} /><span class="muted">exit ${m.exitCode === undefined || m.exitCode === null ? "?" : shown(m.exitCode)}${m.cancelled ? " · cancelled" : ""}</span></footer>
    </article>
  `;
}

export function NoteLine({ entry, kind }) {
  const text = kind === "model_change" ? `Model: ${shown(entry.provider)}/${shown(entry.modelId)}` : kind === "thinking_level_change" ? `Thinking level: ${shown(entry.thinkingLevel)}` : shown(entry.type);
  return html`<div class="note-line" data-entry-id=${entry.id}>${text}</div>`;
}

const VIEWS = {
  user: UserMessage,
  assistant: AssistantMessage,
  compaction: CompactionNode,
  branch_summary: BranchSummaryNode,
  custom_message: CustomMessageNode,
  bash: BashNode,
  subagent_batch: SubagentBatchNode,
};

/**
 * One stable conversation item: re-renders only when its entry, results or label
 * change. It is also the item's error boundary: whatever its view throws while
 * drawing this entry, the item shows "this entry could not be shown" with the
 * entry's id, type and the error, and the rest of the conversation is drawn.
 */
export class EntryItem extends Component {
  componentDidCatch(error) {
    console.warn(`neta: entry ${this.props.item?.id} could not be shown`, error);
    this.setState({ error, errorEntry: this.props.item?.entry });
  }

  shouldComponentUpdate(next, nextState) {
    const a = this.props.item;
    const b = next.item;
    if (nextState.error !== this.state.error) return true;
    return a.entry !== b.entry || a.resultsKey !== b.resultsKey || this.props.label !== next.label || (a.turnUsage?.cost ?? null) !== (b.turnUsage?.cost ?? null);
  }

  render({ item, label, actions, store }, { error, errorEntry }) {
    if (item.kind === "unrenderable") return html`<${UnrenderableEntry} id=${item.id} typeName=${item.typeName} problem=${item.problem} />`;
    if (error && errorEntry === item.entry) {
      return html`<${UnrenderableEntry} id=${item.id} typeName=${entryTypeName(item.entry)} problem=${`drawing it failed (${shown(error?.message ?? error)})`} />`;
    }
    const View = VIEWS[item.kind];
    if (!View) return html`<${NoteLine} entry=${item.entry} kind=${item.kind} />`;
    return html`<${View} entry=${item.entry} results=${item.results} label=${label} actions=${actions} store=${store} turnUsage=${item.turnUsage} />`;
  }
}
