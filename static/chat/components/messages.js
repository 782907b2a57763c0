// Conversation components: one visual language for every kind of entry.

import { Component } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { ToolCard } from "./tool_renderers.js";
import { SubagentBatchNode } from "./subagent_panel.js";
import { ActionRetryBar } from "./state_parts.js";
import { highlightWithin, renderMarkdown } from "../markdown.js";
import { contentText } from "../tree_model.js";
import { formatCost, formatTokens, streamedTokens, turnParts } from "../conversation_model.js";
import { blockProblem, entryTypeName, num, text as shown } from "../entry_check.js";
import { EditInPlace, RegenerateButton, RunBlocked, VersionSwitcher } from "./versions.js";
import { FeedbackButtons } from "./feedback.js";
import { splitDocuments } from "../documents.js";
import { DocumentChips } from "./documents.js";
import { decorateCodeBlocks } from "./code_block.js";
import { typesetWithin } from "../typeset.js";
import { Thinking } from "./thinking.js";
import { t, tn } from "../i18n.js";

export { Thinking };

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

function CopyButton({ text, label = t("Copy") }) {
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
  return html`<button type="button" class="icon-button" onClick=${copy} aria-label=${label} title=${label}>${done ? t("Copied") : t("Copy")}</button>`;
}

function Usage({ usage, turnUsage, message = null }) {
  if (!usage || typeof usage !== "object") return null;
  // Numbers another writer got wrong (a string, NaN) show as "?", not as a broken page.
  // An answer stopped mid-stream has no output count from its model: estimated from what streamed.
  const guessed = !usage.output && message ? streamedTokens(message) : 0;
  const parts = [`↑${formatTokens(usage.input ?? 0)}`, guessed ? `↓~${formatTokens(guessed)}` : `↓${formatTokens(usage.output ?? 0)}`];
  if (usage.cacheRead) parts.push(t("cache {tokens}", { tokens: formatTokens(usage.cacheRead) }));
  const cost = usage.cost && typeof usage.cost === "object" ? usage.cost.total ?? 0 : usage.cost === undefined ? 0 : null;
  return html`<span class="usage" title=${t("tokens in / out, cost of this message")}>${parts.join(" ")} · ${formatCost(cost)}${
    turnUsage ? html`<span class="turn-usage" title=${t("the whole turn")}> · ${t("turn")} ${formatTokens(turnUsage.input)}/${formatTokens(turnUsage.output)} · ${formatCost(turnUsage.cost)}</span>` : null
  }</span>`;
}

function Label({ label }) {
  return label ? html`<span class="entry-label" title=${t("label")}># ${shown(label)}</span>` : null;
}

/** A content block this page cannot draw, marked in place (the rest of the message is drawn). */
export function UnknownBlock({ problem }) {
  return html`<div class="block-unrenderable" data-unrenderable-block="true" role="note">${t("This part of the message could not be shown: {problem}.", { problem })}</div>`;
}

function badBlocks(content, role) {
  if (!Array.isArray(content)) return [];
  return content.map((block) => blockProblem(block, role)).filter(Boolean);
}

/** What an entry that cannot be drawn shows instead: that it is there, its id and type, and why. */
export function UnrenderableEntry({ id, typeName, problem }) {
  return html`
    <article class="msg msg-unrenderable" data-entry-id=${shown(id)} data-unrenderable="true" role="note" aria-label=${t("An entry that could not be shown")}>
      <div class="unrenderable-title">${t("This entry could not be shown")}</div>
      <div class="unrenderable-detail">${t("id")} <code>${shown(id)}</code> · ${t("type")} <code>${shown(typeName)}</code>${problem ? html` · <span>${shown(problem)}</span>` : null}</div>
    </article>
  `;
}

function images(content) {
  return (Array.isArray(content) ? content : []).filter((b) => b?.type === "image" && typeof b.data === "string");
}

export function UserMessage({ entry, label, actions, store }) {
  const { text, documents } = splitDocuments(entry.message.content);
  const [editing, setEditing] = useState(false);
  return html`
    <article class="msg msg-user" data-entry-id=${entry.id} aria-label=${t("Your message")}>
      <div class="msg-body">
        ${editing
          ? html`<${EditInPlace} text=${text} onCancel=${() => setEditing(false)} onSave=${async (value) => {
              const sent = await actions.editSend(entry.id, value);
              if (sent !== false) setEditing(false);
              return sent;
            }} />`
          : html`<div class="user-text">${text}</div>`}
        <${DocumentChips} documents=${documents} />
        ${images(entry.message.content).map((b, i) => html`<img key=${i} class="msg-image" alt=${t("attached image")} src=${`data:${b.mimeType};base64,${b.data}`} />`)}
        ${badBlocks(entry.message.content, "user").map((problem, i) => html`<${UnknownBlock} key=${`bad${i}`} problem=${problem} />`)}
        ${store ? html`<${Unanswered} entry=${entry} store=${store} actions=${actions} />` : null}
      </div>
      <footer class="msg-actions">
        ${store ? html`<${VersionSwitcher} entry=${entry} store=${store} actions=${actions} />` : null}
        <${Label} label=${label} />
        <${CopyButton} text=${text} label=${t("Copy message")} />
        ${editing || !store ? null : html`<${RunBlocked} store=${store}>${(busy) => html`<button type="button" class="icon-button" disabled=${busy} onClick=${() => setEditing(true)}
            title=${busy ? t("Available when the run ends") : t("Edit this message and send it as a new version")}>${t("Edit")}</button>`}<//>`}
        ${store
          ? html`<${RunBlocked} store=${store}>${(busy) => html`<button type="button" class="icon-button" disabled=${busy} onClick=${() => actions.continueFrom(entry.id)}
              title=${busy ? t("Available when the run ends") : t("Edit this message and send it as a new branch")}>${t("Continue from here")}</button>`}<//>`
          : null}
      </footer>
    </article>
  `;
}

/** A prompt at the leaf that has no answer (a run that never started, a fork made here): ask for one. */
function Unanswered({ entry, store, actions }) {
  useStore(store, ["leaf", "run"]);
  const snapshot = store.snapshot;
  if (!snapshot || snapshot.leafId !== entry.id || store.running || store.readOnly) return null;
  return html`<div class="unanswered" role="note"><span class="muted">${t("No answer yet.")}</span>
    <button type="button" class="small" onClick=${() => actions.regenerate(entry.id, "answer", { prompt: true })}>${t("Answer this message")}</button></div>`;
}

/** The assistant's blocks in order: thinking, text, tool calls (the streaming message, a child's stream). */
export function AssistantBlocks({ message, results = {}, store = null, streaming = false, entryId = null }) {
  const blocks = Array.isArray(message.content) ? message.content : [];
  return blocks.map((block, i) => html`<${Block} key=${block?.type === "toolCall" ? block.id ?? i : i} block=${block} index=${i} results=${results} store=${store} streaming=${streaming} entryId=${entryId} />`);
}

/** A cut, failed or aborted answer's outcome bar, with what can be done about it. */
function Outcome({ message, entryId, actions, store }) {
  const stop = message.stopReason;
  if (stop === "error") {
    return html`<${ActionRetryBar} status="failed" label=${t("Error")} className="msg-error" text=${shown(message.errorMessage) || t("the model returned an error")}
      onRetry=${() => actions.retry(entryId)} retryTitle=${t("Answer the same message again (a new version beside this one)")} />`;
  }
  if (stop === "aborted") {
    return html`<${ActionRetryBar} status="aborted" label=${t("Aborted")} className="msg-aborted" text=${message.errorMessage ? shown(message.errorMessage) : t("the answer was stopped")}
      onRetry=${() => actions.retry(entryId)} retryTitle=${t("Answer the same message again (a new version beside this one)")} />`;
  }
  if (stop === "length") {
    return html`<${ActionRetryBar} status="partial" label=${t("Cut short")} className="msg-cut" text=${t("The answer reached the model's output limit.")}
      action=${store ? html`<${RunBlocked} store=${store}>${(busy) => html`<button type="button" class="icon-button action-retry" disabled=${busy}
        onClick=${() => actions.continueAnswer(entryId)} title=${t("The model goes on where it stopped (in the same answer)")}>${t("Continue")}</button>`}<//>` : null} />`;
  }
  return null;
}

/** The steps of a turn (its tool calls, thinking and interim text) in one box that folds. */
function Steps({ parts, store, open: openByDefault }) {
  const [open, setOpen] = useState(null); // null: the default (open until the answer is there)
  const isOpen = open ?? openByDefault;
  const label = tn("{n} step", "{n} steps", parts.stepCount);
  return html`
    <details class="steps" open=${isOpen} onToggle=${(e) => e.currentTarget.open !== isOpen && setOpen(e.currentTarget.open)}>
      <summary><span class="steps-title">${label}</span>${parts.tools.length ? html`<span class="steps-tools"> · ${parts.tools.join(", ")}</span>` : null}${parts.errors
        ? html`<span class="steps-errors"> · ${tn("{n} error", "{n} errors", parts.errors)}</span>`
        : null}</summary>
      ${isOpen ? html`<div class="steps-body">${parts.steps.map((step) => html`<${StepView} key=${step.member.id} step=${step} store=${store} />`)}</div>` : null}
    </details>
  `;
}

function StepView({ step, store }) {
  const { member, blocks } = step;
  return blocks.map(({ block, index }) => html`<${Block} key=${index} block=${block} index=${index} results=${member.results} store=${store} entryId=${member.id} />`);
}

function Block({ block, index, results = {}, store = null, streaming = false, entryId = null }) {
  const problem = streaming ? null : blockProblem(block, "assistant");
  if (problem) return html`<${UnknownBlock} problem=${problem} />`;
  if (block?.type === "thinking") return block.thinking ? html`<${Thinking} text=${block.thinking} streaming=${streaming} entryId=${entryId} index=${index} />` : null;
  if (block?.type === "text") return block.text ? html`<${Markdown} text=${block.text} streaming=${streaming} />` : null;
  if (block?.type === "toolCall") return html`<${ToolCard} call=${block} result=${results[block.id] ?? null} store=${store} streaming=${streaming && block.argsText !== undefined} />`;
  return null;
}

/**
 * One answer, one card: a turn's model calls (item.members: its assistant messages, and
 * the subagent batches between them) drawn as one assistant answer — the steps (thinking,
 * tool calls, interim text) in a box that folds, the answer's text, its outcome, and the
 * actions once (versions of the answer, usage of the whole turn, copy, feedback,
 * regenerate, continue from here).
 */
export function TurnCard({ item, label, actions, store }) {
  const parts = turnParts(item);
  const first = item.members[0];
  const lastEntry = item.entry;
  const message = lastEntry.message;
  const stop = message.stopReason;
  const failed = stop === "error" || stop === "aborted";
  const copyText = parts.final || item.members.map((m) => (m.kind === "assistant" ? contentText(m.entry.message.content) : "")).filter(Boolean).join("\n\n");
  const single = item.members.length === 1;
  return html`
    <article class=${`msg msg-assistant msg-turn${failed ? ` msg-${stop}` : ""}`} data-entry-id=${first.id} data-last-entry-id=${lastEntry.id} aria-label=${t("Assistant answer")}>
      <div class="msg-body">
        ${parts.onlyThinking
          ? parts.steps.map((step) => html`<${StepView} key=${step.member.id} step=${step} store=${store} />`)
          : html`<${Steps} parts=${parts} store=${store} open=${!parts.final} />`}
        ${parts.batches.map((member) => html`<${SubagentBatchNode} key=${member.id} entry=${member.entry} results=${member.results} store=${store} />`)}
        ${parts.final ? html`<${Markdown} text=${parts.final} />` : null}
        <${Outcome} message=${message} entryId=${lastEntry.id} actions=${actions} store=${store} />
      </div>
      <footer class="msg-actions">
        ${store ? html`<${VersionSwitcher} entry=${first.entry} store=${store} actions=${actions} />` : null}
        <span class="model-name" title=${t("model")}>${shown(message.model)}</span>
        ${single
          ? html`<${Usage} usage=${message.usage} message=${message} />`
          : item.turnUsage
            ? html`<span class="usage" title=${tn("tokens in / out, cost of this answer ({n} model call)", "tokens in / out, cost of this answer ({n} model calls)", item.turnUsage.messages)}>↑${formatTokens(item.turnUsage.input)} ↓${item.turnUsage.estimated ? "~" : ""}${formatTokens(item.turnUsage.output)} · ${formatCost(item.turnUsage.cost)}</span>`
            : null}
        <${Label} label=${label} />
        ${copyText ? html`<${CopyButton} text=${copyText} label=${t("Copy answer")} />` : null}
        ${store && !failed ? html`<${FeedbackButtons} entryId=${lastEntry.id} store=${store} actions=${actions} />` : null}
        ${failed || !store ? null : html`<${RegenerateButton} entry=${first.entry} actions=${actions} store=${store} />`}
        ${store
          ? html`<${RunBlocked} store=${store}>${(busy) => html`<button type="button" class="icon-button" disabled=${busy} onClick=${() => actions.continueFrom(lastEntry.id)}
              title=${busy ? t("Available when the run ends") : t("Move the leaf here: the next prompt continues from this answer")}>${t("Continue from here")}</button>`}<//>`
          : null}
      </footer>
    </article>
  `;
}

/** A single assistant message as a card of its own (kept for other pages that draw entries one by one). */
export function AssistantMessage({ entry, results, label, actions, store }) {
  return html`<${TurnCard} item=${{ id: entry.id, kind: "turn", members: [{ id: entry.id, kind: "assistant", entry, results: results ?? {}, resultsKey: "" }], entry, turnUsage: null }} label=${label} actions=${actions} store=${store} />`;
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
        <button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)}>${t("Continue from here")}</button>
      </footer>
    </article>
  `;
}

export function CompactionNode(props) {
  const tokens = num(props.entry.tokensBefore);
  return html`<${SummaryNode} ...${props} title=${t("Context compacted")} detail=${tokens !== null ? t("{tokens} tokens before", { tokens: formatTokens(tokens) }) : null} className="msg-compaction" />`;
}

export function BranchSummaryNode(props) {
  return html`<${SummaryNode} ...${props} title=${t("Branch summary")} detail=${t("what happened on the branch that was left")} className="msg-branch-summary" />`;
}

export function CustomMessageNode({ entry, label, actions }) {
  const content = entry.content ?? entry.message?.content;
  const kind = shown(entry.customType ?? entry.message?.customType ?? "custom");
  return html`
    <article class="msg msg-node msg-custom" data-entry-id=${entry.id} aria-label=${t("Custom message: {kind}", { kind })}>
      <div class="node-title">✉ ${kind}</div>
      <${Markdown} text=${contentText(content)} />
      <footer class="msg-actions"><${Label} label=${label} /><button type="button" class="icon-button" onClick=${() => actions.continueFrom(entry.id)}>${t("Continue from here")}</button></footer>
    </article>
  `;
}

export function BashNode({ entry, label }) {
  const m = entry.message;
  return html`
    <article class="msg msg-node msg-bash" data-entry-id=${entry.id} aria-label=${t("Shell command")}>
      <pre class="tool-output terminal"><code>$ ${shown(m.command)}${"\n"}${shown(m.output)}</code></pre>
      <footer class="msg-actions"><${Label} label=${label} /><span class="muted">${t("exit {code}", { code: m.exitCode === undefined || m.exitCode === null ? "?" : shown(m.exitCode) })}${m.cancelled ? ` · ${t("cancelled")}` : ""}</span></footer>
    </article>
  `;
}

export function NoteLine({ entry, kind }) {
  const text = kind === "model_change" ? t("Model: {model}", { model: `${shown(entry.provider)}/${shown(entry.modelId)}` }) : kind === "thinking_level_change" ? t("Thinking level: {level}", { level: shown(entry.thinkingLevel) }) : shown(entry.type);
  return html`<div class="note-line" data-entry-id=${entry.id}>${text}</div>`;
}

const VIEWS = {
  user: UserMessage,
  assistant: AssistantMessage,
  turn: TurnCard,
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
    return a.entry !== b.entry || a.resultsKey !== b.resultsKey || a.key !== b.key || this.props.label !== next.label || (a.turnUsage?.cost ?? null) !== (b.turnUsage?.cost ?? null);
  }

  render({ item, label, actions, store }, { error, errorEntry }) {
    if (item.kind === "unrenderable") return html`<${UnrenderableEntry} id=${item.id} typeName=${item.typeName} problem=${item.problem} />`;
    if (error && errorEntry === item.entry) {
      return html`<${UnrenderableEntry} id=${item.id} typeName=${entryTypeName(item.entry)} problem=${t("drawing it failed ({error})", { error: shown(error?.message ?? error) })} />`;
    }
    const View = VIEWS[item.kind];
    if (!View) return html`<${NoteLine} entry=${item.entry} kind=${item.kind} />`;
    if (item.kind === "turn") return html`<${TurnCard} item=${item} label=${label} actions=${actions} store=${store} />`;
    return html`<${View} entry=${item.entry} results=${item.results} label=${label} actions=${actions} store=${store} turnUsage=${item.turnUsage} />`;
  }
}
