// Entry point of the chat page: store, socket, components. A share link's page (data.share)
// draws the shared path alone, read-only, with no socket.

import { h, render } from "preact";
import { App } from "./components/app.js";
import { Connection } from "./connection.js";
import { sessionApi } from "./api.js";
import { SessionStore } from "./store.js";
import { DraftConnection, draftSnapshot } from "./draft.js";
import { applyTheme, storedTheme } from "./theme.js";
import { pathSnapshot, SharedApp } from "./components/shared.js";

const data = JSON.parse(document.getElementById("neta-chat-data").textContent);
applyTheme(storedTheme(data.user.username), data.user.username, { remember: false });

if (data.share) startShared(data);
else startChat(data);

function startShared(data) {
  const store = new SessionStore({ sessionId: null });
  store.setSnapshot(pathSnapshot(data.share));
  store.readOnly = true;
  store.connection = { state: "live", attempt: 0, lastError: null, since: Date.now() };
  render(h(SharedApp, { data, store }), document.getElementById("app"));
  window.neta = { store, data };
}

function startChat(data) {
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
}
