// The question panel (the `ask_user` tool): while the run waits for the user, the
// question sits at the composer with its options as buttons and a free-text field. The
// question is the open `ask_user` call at the leaf (plan.js), so a reload or another tab
// shows it too; the answer goes over the socket (`answer {toolCallId, answer}`).

import { useMemo, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { registerToolRenderer } from "./tool_renderers.js";
import { openQuestion } from "../plan.js";
import { t } from "../i18n.js";

export function ClarifyPanel({ store, connection }) {
  useStore(store, ["leaf", "tree", "run", "connection"]);
  const snapshot = store.snapshot;
  const question = useMemo(() => (snapshot ? openQuestion(snapshot, (id) => store.entry(id)) : null), [snapshot?.activePath, snapshot?.entries]);
  const [text, setText] = useState("");
  const [chosen, setChosen] = useState([]);
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  if (!question || store.run.state !== "waiting") return null;
  const offline = store.connection.state !== "live" || store.readOnly;

  const answer = async (value) => {
    setSending(true);
    setError(null);
    try {
      await connection.send("answer", { toolCallId: question.toolCallId, answer: value });
      setText("");
      setChosen([]);
    } catch (e) {
      setError(e.message || String(e));
    } finally {
      setSending(false);
    }
  };
  const pick = (option) => {
    if (!question.multiSelect) return answer(option);
    setChosen(chosen.includes(option) ? chosen.filter((o) => o !== option) : [...chosen, option]);
  };
  const sendFree = (event) => {
    event.preventDefault();
    const free = text.trim();
    if (question.multiSelect) return answer(free ? [...chosen, free] : chosen);
    if (free) answer(free);
  };
  return html`
    <section class="panel clarify-panel state-waiting" aria-label=${t("Question from the agent")} data-tool-call-id=${question.toolCallId}>
      <header class="panel-head"><span class="panel-title">${t("Waiting for you")}</span><span class="muted">${t("the run goes on when you answer; a message sent meanwhile waits for the run")}</span></header>
      <div class="panel-body">
        <p class="clarify-question">${question.question}</p>
        ${question.options.length
          ? html`<div class="clarify-options" role="group" aria-label=${t("Options")}>
              ${question.options.map((option) => html`<button type="button" key=${option} class=${`option-button${chosen.includes(option) ? " chosen" : ""}`}
                aria-pressed=${question.multiSelect ? chosen.includes(option) : undefined} disabled=${sending || offline} onClick=${() => pick(option)}>${option}</button>`)}
            </div>`
          : null}
        ${question.allowFreeText || question.multiSelect
          ? html`<form class="clarify-free" onSubmit=${sendFree}>
              ${question.allowFreeText
                ? html`<label class="visually-hidden" for="clarify-input">${t("Your answer")}</label>
                    <input id="clarify-input" type="text" placeholder=${question.options.length ? t("Or write your own answer…") : t("Your answer…")} value=${text} onInput=${(e) => setText(e.currentTarget.value)} />`
                : null}
              <button type="submit" class="primary" disabled=${sending || offline || (!text.trim() && !(question.multiSelect && chosen.length))}>${t("Answer")}</button>
            </form>`
          : null}
        ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      </div>
    </section>
  `;
}

registerToolRenderer("ask_user", {
  pendingStatus: "waiting",
  summary: (args) => (typeof args?.question === "string" ? args.question : ""),
  Body: ({ args, result }) => html`
    ${Array.isArray(args?.options) && args.options.length ? html`<ul class="clarify-card-options">${args.options.map((o, i) => html`<li key=${i}>${String(o)}</li>`)}</ul>` : null}
    <div class="tool-note">${result ? result.message.content?.[0]?.text ?? "" : t("Waiting for the user's answer.")}</div>
  `,
});
