// The plan panel (the `todo` tool): pinned above the composer, a progress bar (n of m
// done, the current item), collapsible; the plan at the leaf (plan.js: the last todo
// result on the active path), so a branch switch or a reload shows that branch's plan.
// Older plan states stay in their tool cards (the `todo` renderer below).

import { useEffect, useMemo, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { registerToolRenderer } from "./tool_renderers.js";
import { planAt, planPinned } from "../plan.js";
import { stateToken } from "../state_tokens.js";
import { t } from "../i18n.js";

const MARKS = { pending: "○", in_progress: "◐", completed: "●" };

function openByDefault() {
  try {
    const kept = localStorage.getItem("neta.planOpen");
    // On a phone the plan shows its head (progress and current item) until opened.
    return kept === null ? !narrow() : kept !== "false";
  } catch {
    return true;
  }
}

function TodoList({ todos }) {
  return html`<ol class="todo-list">
    ${todos.map((todo, i) => html`<li key=${i} class=${`todo-item state-${stateToken(todo.status)}`} data-status=${todo.status}>
      <span class="todo-mark" aria-hidden="true">${MARKS[todo.status] ?? "○"}</span>
      <span class="todo-text">${todo.content}</span>
      <span class="visually-hidden">(${todo.status === "completed" ? t("completed") : todo.status === "in_progress" ? t("in progress") : t("pending")})</span>
    </li>`)}
  </ol>`;
}

export function ProgressBar({ done, total, label }) {
  const percent = total ? Math.round((done / total) * 100) : 0;
  return html`<span class="progress" role="progressbar" aria-label=${label} aria-valuemin="0" aria-valuemax=${total} aria-valuenow=${done}>
    <span class="progress-fill" style=${`width:${percent}%`}></span>
  </span>`;
}

/** A phone-sized page: the plan gives the question room while one waits. */
function narrow() {
  return typeof matchMedia === "function" && matchMedia("(max-width: 900px)").matches;
}

export function PlanPanel({ store }) {
  useStore(store, ["leaf", "tree", "run"]);
  const snapshot = store.snapshot;
  const plan = useMemo(() => (snapshot ? planAt(snapshot, (id) => store.entry(id)) : null), [snapshot?.activePath, snapshot?.entries]);
  const [open, setOpen] = useState(openByDefault);
  const [unfolded, setUnfolded] = useState(false); // opened by hand while a question waits
  const waiting = store.run.state === "waiting";
  useEffect(() => {
    if (!waiting) setUnfolded(false); // the next question folds it again
  }, [waiting]);
  if (!planPinned(plan, snapshot, (id) => store.entry(id), store.running)) return null;
  // While a question waits on a narrow screen the plan shows its head only (the reader's
  // own choice, kept in localStorage, comes back after the answer).
  const folded = waiting && narrow() && !unfolded;
  const shown = open && !folded;
  const toggle = () => {
    if (folded) {
      setUnfolded(true);
      if (open) return;
    }
    setOpen(!open);
    try {
      localStorage.setItem("neta.planOpen", String(!open));
    } catch {
      /* private mode */
    }
  };
  const finished = plan.done === plan.total;
  const token = finished ? "done" : "running";
  return html`
    <section class=${`panel plan-panel state-${token}`} aria-label=${t("Plan")} data-done=${plan.done} data-total=${plan.total}>
      <header class="panel-head">
        <button type="button" class="panel-toggle" aria-expanded=${shown} onClick=${toggle}>
          <span class="panel-title">${t("Plan")}</span>
          <span class="plan-count">${t("{done} of {total} done", { done: plan.done, total: plan.total })}</span>
          <${ProgressBar} done=${plan.done} total=${plan.total} label=${t("Plan progress")} />
          <span class="plan-current">${plan.current ? plan.current.content : finished ? t("all done") : ""}</span>
          <span class="chevron" aria-hidden="true">${shown ? "▾" : "▸"}</span>
        </button>
      </header>
      ${shown ? html`<div class="panel-body"><${TodoList} todos=${plan.todos} /></div>` : null}
    </section>
  `;
}

registerToolRenderer("todo", {
  summary: (args) => {
    const todos = Array.isArray(args?.todos) ? args.todos : [];
    return t("{done} of {total} done", { done: todos.filter((todo) => todo?.status === "completed").length, total: todos.length });
  },
  Body: ({ args, result }) => {
    const todos = Array.isArray(result?.message?.details?.todos) ? result.message.details.todos : Array.isArray(args?.todos) ? args.todos.filter((todo) => typeof todo?.content === "string") : [];
    return html`
      <${TodoList} todos=${todos.map((todo) => ({ content: String(todo.content), status: ["pending", "in_progress", "completed"].includes(todo.status) ? todo.status : "pending" }))} />
      ${result?.message?.isError ? html`<div class="tool-note">${result.message.content?.[0]?.text ?? ""}</div>` : null}
    `;
  },
});
