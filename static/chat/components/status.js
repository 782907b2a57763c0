// Status bar: context usage (tokens / window, model, thinking level), the tool sandbox, run state, connection.

import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { formatTokens } from "../conversation_model.js";
import { stateToken } from "../state_tokens.js";
import { meterTokens } from "../context_meter.js";
import { t } from "../i18n.js";

// Everyday words: a run that is idle or done and a connection that is live say nothing
// (their elements stay, quiet, with their data-state); the rest says what is going on.
const RUN_LABELS = {
  idle: "", completed: "",
  get queued() { return t("Starting…"); },
  get running() { return t("Working…"); },
  get waiting() { return t("Waiting for you"); },
  get aborted() { return t("Aborted"); },
  get failed() { return t("Failed"); },
  get lost() { return t("Lost (the server stopped)"); },
};
const CONNECTION_LABELS = {
  live: "",
  get connecting() { return t("Connecting…"); },
  get syncing() { return t("Catching up…"); },
  get reconnecting() { return t("Connection lost: reconnecting"); },
  get offline() { return t("Offline"); },
};

function Countdown({ at }) {
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 500);
    return () => clearInterval(timer);
  }, [at]);
  const seconds = Math.max(0, Math.ceil((at - Date.now()) / 1000));
  return html`<span> ${t("in {seconds} s", { seconds })}</span>`;
}

export function StatusBar({ store, agent, onReconnect, onCompact = null }) {
  useStore(store, ["context", "run", "connection", "live", "leaf"]);
  const context = store.snapshot?.runtimeContext ?? {};
  const stats = store.stats;
  const meter = meterTokens(store.snapshot, (id) => store.entry(id), stats);
  const tokens = meter.tokens;
  const window = stats?.contextWindow || context.contextWindow || agent.model.contextWindow;
  const model = context.model?.modelId ?? stats?.model ?? agent.model.modelId;
  const thinking = context.thinkingLevel ?? agent.thinkingLevel;
  const percent = window ? Math.min(100, (tokens / window) * 100) : 0;
  const run = store.running && !["queued", "running", "waiting"].includes(store.run.state) ? "running" : store.run.state;
  const connection = store.connection;
  const notes = store.runNotes.runId && store.runNotes.runId === store.run.runId ? store.runNotes.notes : [];
  // The run's latest note (a failover, a clamped thinking level); all of them on hover.
  const lastNote = notes.length ? notes[notes.length - 1] : null;
  const hasMessages = Boolean(store.snapshot?.entries?.some((e) => e?.type === "message"));
  const runQuiet = !RUN_LABELS[run];
  const narrow = typeof matchMedia === "function" && matchMedia("(max-width: 900px)").matches;
  return html`
    <div class="status-bar" role="status" aria-label=${t("Status")}>
      <span class="status-item context-usage" title=${t("Context used by the active path")}>
        <span class="meter" aria-hidden="true"><span class=${percent > 80 ? "meter-fill warn" : "meter-fill"} style=${`width:${percent.toFixed(1)}%`}></span></span>
        <span title=${meter.approximate ? t("estimated from the summary and the kept messages (compacted since the last answer)") : undefined}>${meter.approximate ? "~" : ""}${formatTokens(tokens)}</span> / ${formatTokens(window)} ${t("tokens")}
      </span>
      ${onCompact ? html`<button type="button" class="link-button compact-button" disabled=${store.running || !store.snapshot || !hasMessages || !tokens} onClick=${onCompact} title=${t("Summarize the older part of the context to free room (Pi's /compact; /compact instructions also works in the composer)")}>${t("Compact")}</button>` : null}
      ${narrow ? null : html`<span class="status-item model-name-status" title=${t("Model of this conversation: {model}; thinking level {thinking}", { model, thinking })}>${model}${thinking && thinking !== "off" ? ` · ${t("thinking {level}", { level: thinking })}` : ""}</span>`}
      ${agent.sandbox && agent.sandbox.mode !== "bwrap"
        ? html`<span class=${`status-item sandbox sandbox-${agent.sandbox.mode}`} data-mode=${agent.sandbox.mode}
            title=${t("The agent's shell commands run without isolation: {reason}", { reason: agent.sandbox.reason })}>⚠ ${t("Commands not isolated")}</span>`
        : null}
      <span class=${`status-item run-state run-${run}${run === "idle" ? "" : ` state-${stateToken(run)}`}${runQuiet ? " quiet" : ""}`} data-state=${run}>
        ${run === "running" || run === "queued" ? html`<span class="spinner" aria-hidden="true"></span>` : null} ${RUN_LABELS[run] ?? run}
        ${store.run.error && run !== "running" && !runQuiet ? html`<span class="run-error" title=${store.run.error}>: ${store.run.error.slice(0, 60)}</span>` : null}
      </span>
      ${lastNote
        ? html`<span class=${`status-item run-note note-${lastNote.kind}`} data-kind=${lastNote.kind}
            title=${notes.map((n) => n.text).join("\n")}>${lastNote.kind === "failover" ? "↪ " : "θ "}${lastNote.text.slice(0, 160)}</span>`
        : null}
      <span class=${`status-item connection conn-${connection.state}${connection.state === "live" ? " quiet" : ""}`} data-state=${connection.state}>
        <span class="dot" aria-hidden="true"></span> ${CONNECTION_LABELS[connection.state] ?? connection.state}
        ${connection.state === "reconnecting" && connection.retryAt ? html`<${Countdown} at=${connection.retryAt} />` : null}
        ${connection.state === "reconnecting" || connection.state === "offline" ? html` <button type="button" class="link-button" onClick=${onReconnect}>${t("Reconnect now")}</button>` : null}
      </span>
    </div>
  `;
}
