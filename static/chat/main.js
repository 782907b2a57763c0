// Entry point of the chat page: store, socket, components.

import { h, render } from "preact";
import { App } from "./components/app.js";
import { Connection } from "./connection.js";
import { sessionApi } from "./api.js";
import { SessionStore } from "./store.js";
import { DraftConnection, draftSnapshot } from "./draft.js";
import { applyTheme, storedTheme } from "./theme.js";

const data = JSON.parse(document.getElementById("neta-chat-data").textContent);
applyTheme(storedTheme(data.user.username), data.user.username, { remember: false });
const store = new SessionStore({ sessionId: data.sessionId });
const api = sessionApi(data.sessionId);

async function refreshRunState() {
  try {
    const page = await api.lastRun();
    const run = page.results?.[0];
    // Only a run still going is news after a reload; an old failure stays with its message.
    if (run && ["queued", "running"].includes(run.status)) store.setRun({ runId: run.runId, state: run.status, error: run.error || null, notes: run.notes || [] });
  } catch {
    /* the status bar keeps what the socket said */
  }
}

const draft = data.sessionId === null; // "New session": created on the first send (draft.js)
const connection = draft ? new DraftConnection() : new Connection({
  url: data.urls.socket,
  snapshotUrl: `${data.urls.api}sessions/${encodeURIComponent(data.sessionId)}/snapshot/`,
  store,
  heartbeatSeconds: data.heartbeatSeconds,
  onLive: refreshRunState,
  onFatal: (reason) => {
    if (reason === "unauthenticated") window.location.assign(`/login/?next=${encodeURIComponent(window.location.pathname)}`);
  },
});

if (draft) {
  store.setSnapshot(draftSnapshot(data.agent));
  store.connection = { state: "live", attempt: 0, lastError: null, since: Date.now() };
} else if (window.location.pathname !== data.urls.page) {
  // `/` opened (or created) this session: a reload must come back to it.
  window.history.replaceState(null, "", data.urls.page);
}

render(h(App, { data, store, connection }), document.getElementById("app"));
connection.start();

// For the browser tests and the benchmarks (read-only use).
window.neta = { store, connection, data };
