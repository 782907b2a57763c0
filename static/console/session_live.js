// The console's session page, live: the chat page's store, socket and tree component on
// the staff page (docs/console.md, "Sessions"). Read-only: the page never sends a
// command over the socket, and the tree offers no leaf moves, labels or forks (the
// page's own forms do those, through the services). Without JavaScript the page keeps
// its static content; this module only adds to it.
//
// Also: a replay of each subagent run listed on the page, from
// `GET /api/subagent-runs/{runId}/events/`, a page of events at a time, in seq order.

import { h, render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { html } from "../chat/components/html.js";
import { useStore } from "../chat/components/hooks.js";
import { TreeSidebar } from "../chat/components/tree.js";
import { Connection } from "../chat/connection.js";
import { api, sessionApi } from "../chat/api.js";
import { SessionStore } from "../chat/store.js";
import { t, tn } from "../chat/i18n.js";

const REPLAY_PAGE = 50;

function RunState({ store }) {
  useStore(store, ["run", "connection", "live", "tree"]);
  const { state, lastError } = store.connection;
  const run = store.run;
  const entries = store.snapshot?.entries.length ?? 0;
  return html`
    <p class="console-live-state" data-connection=${state} data-run-state=${run.state}>
      <span class="console-badge ${state === "live" ? "completed" : "queued"}">${state}</span>
      ${" "}${t("run")} <span class=${`console-badge ${run.state}`}>${run.state}</span>
      ${run.runId ? html` <code>${String(run.runId).slice(0, 8)}</code>` : null}
      ${store.live ? html` · ${t("streaming")} <code>${store.live.entryId}</code>` : null}
      ${" "}· ${tn("{n} entry loaded", "{n} entries loaded", entries)}
      ${lastError ? html` · <span class="console-live-error">${lastError}</span>` : null}
    </p>
  `;
}

// A short session's tree takes the room its rows need, a long one scrolls in 420 px.
const TREE_CHROME_PX = 150;
const TREE_ROW_PX = 28;
const TREE_MAX_PX = 420;

function LiveTree({ store, entriesApi }) {
  useStore(store, ["tree", "live"]);
  const rows = (store.snapshot?.entries.length ?? 0) + (store.live ? 1 : 0);
  const height = Math.min(TREE_MAX_PX, TREE_CHROME_PX + TREE_ROW_PX * rows);
  const actions = {
    goTo: () => {},
    label: async () => {},
    fork: () => {},
    async loadOlder() {
      try {
        await store.loadOlder(async (cursor, limit) => (await entriesApi.entries(cursor, limit)).results);
      } catch (e) {
        console.warn("neta: could not load older entries", e);
      }
    },
  };
  return html`
    <${RunState} store=${store} />
    <div class="console-live-tree" style=${`height: ${height}px`}><${TreeSidebar} store=${store} actions=${actions} open=${true} onClose=${() => {}} readOnly=${true} /></div>
  `;
}

function eventSummary(event) {
  const p = event.payload ?? {};
  const bits = [];
  for (const key of ["name", "status", "kind", "code", "stopReason"]) if (p[key] != null) bits.push(`${key} ${p[key]}`);
  const text = typeof p.delta === "string" ? p.delta : typeof p.text === "string" ? p.text : typeof p.message === "string" ? p.message : "";
  if (text) bits.push(JSON.stringify(text.length > 160 ? `${text.slice(0, 159)}…` : text));
  return bits.join(" · ");
}

/** One subagent run's events, replayed a page at a time (afterSeq, limit). */
function Replay({ runId }) {
  const [state, setState] = useState({ events: [], after: 0, hasMore: true, loading: false, error: null, status: null });
  const more = async () => {
    setState((s) => ({ ...s, loading: true, error: null }));
    try {
      const page = await api(`subagent-runs/${encodeURIComponent(runId)}/events/?afterSeq=${state.after}&limit=${REPLAY_PAGE}`);
      setState((s) => ({ events: [...s.events, ...page.events], after: page.nextAfterSeq, hasMore: page.hasMore, loading: false, error: null, status: page.status }));
    } catch (e) {
      setState((s) => ({ ...s, loading: false, error: e.message ?? String(e) }));
    }
  };
  useEffect(() => {
    more(); // the first page when the replay opens
  }, [runId]);
  return html`
    <div class="console-replay" data-run=${runId}>
      <p class="muted">${state.status ? html`${t("status")} <span class=${`console-badge ${state.status}`}>${state.status}</span> · ` : null}${tn("{n} event shown", "{n} events shown", state.events.length)}</p>
      <ol class="console-replay-events">
        ${state.events.map((e) => html`<li key=${e.seq} data-seq=${e.seq}><code>#${e.seq}</code> <strong>${e.type}</strong> ${eventSummary(e)}</li>`)}
      </ol>
      ${state.error ? html`<p class="errornote">${t("Could not load the events: {error}", { error: state.error })}</p>` : null}
      ${state.hasMore && state.events.length > 0 ? html`<button type="button" class="button" disabled=${state.loading} onClick=${more}>${state.loading ? t("Loading…") : t("Next {n} events", { n: REPLAY_PAGE })}</button>` : null}
    </div>
  `;
}

function addReplays() {
  for (const row of document.querySelectorAll("tr[data-subagent-run]")) {
    const runId = row.dataset.subagentRun;
    const cell = document.createElement("td");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button console-replay-button";
    button.textContent = t("Replay");
    cell.append(button);
    row.append(cell);
    let panel = null;
    button.addEventListener("click", () => {
      if (panel) {
        panel.remove();
        panel = null;
        button.textContent = t("Replay");
        return;
      }
      panel = document.createElement("tr");
      const td = document.createElement("td");
      td.colSpan = row.children.length;
      panel.append(td);
      row.after(panel);
      render(h(Replay, { runId }), td);
      button.textContent = t("Hide the replay");
    });
  }
}

const dataNode = document.getElementById("neta-console-session");
const mount = document.getElementById("session-live");
if (dataNode && mount) {
  const data = JSON.parse(dataNode.textContent);
  const store = new SessionStore({ sessionId: data.sessionId });
  const entriesApi = sessionApi(data.sessionId);
  const connection = new Connection({
    url: data.socket,
    snapshotUrl: `/api/sessions/${encodeURIComponent(data.sessionId)}/snapshot/`,
    store,
    heartbeatSeconds: data.heartbeatSeconds,
    readOnly: true,
    onFatal: () => {}, // signed out or gone: the state line says so (the store keeps what it showed)
  });
  mount.hidden = false;
  render(h(LiveTree, { store, entriesApi }), mount.querySelector(".console-live-body"));
  connection.start();
  addReplays();
  window.netaConsole = { store, connection }; // for the browser tests (read-only use)
}
