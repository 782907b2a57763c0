// The session list of one agent (the page opened the agent's last session when the
// agent restores sessions).

import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { sessionsApi } from "../api.js";
import { ArchivedSessions, SessionRowActions, SessionSearch } from "./session_search.js";
import { liveEntryCount, shownTitle } from "../session_title.js";
import { groupSessions } from "../session_groups.js";
import { sessionApi } from "../api.js";
import { formatDate, formatTime, t, tn } from "../i18n.js";

function when(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const today = new Date();
  return date.toDateString() === today.toDateString() ? formatTime(date) : formatDate(date);
}

/** Where switching to an agent goes: its last session, or a draft (nothing left behind). */
function agentUrl(data, name) {
  const agent = data.agents.find((a) => a.name === name);
  return `${data.urls.home}?agent=${encodeURIComponent(name)}${agent?.restoreLastSession ? "" : "&new=1"}`;
}

export function SessionList({ data, store, open, onClose, onNew }) {
  useStore(store, ["session", "tree"]);
  const [sessions, setSessions] = useState(() => mergePinned(data.sessions, data.pinned));
  const [error, setError] = useState(null);
  const [hits, setHits] = useState(null); // search results (null: not searching)
  const current = data.sessionId;
  const [archivedNow, setArchivedNow] = useState(null); // the last row archived here (the archived list adds it)
  const onGone = (sessionId, what) => {
    const row = sessions.find((s) => s.sessionId === sessionId) ?? hits?.find((h) => h.session.sessionId === sessionId)?.session;
    if (what === "archive" && row) setArchivedNow({ ...row, status: "archived" });
    setSessions((list) => list.filter((s) => s.sessionId !== sessionId));
    setHits((list) => list && list.filter((h) => h.session.sessionId !== sessionId));
    if (sessionId === current) window.location.assign(`${data.urls.home}?agent=${encodeURIComponent(data.agent.name)}&new=1`);
  };
  const shown = hits ? hits.map((h) => ({ ...h.session, snippet: h.snippet, pinned: false })) : sessions;
  const groups = hits ? [{ label: null, sessions: shown }] : groupSessions(shown);
  const togglePin = async (row) => {
    try {
      const { pinned } = await sessionApi(row.sessionId).pin(!row.pinned);
      setSessions((list) => list.map((s) => (s.sessionId === row.sessionId ? { ...s, pinned } : s)));
    } catch (e) {
      setError(`Could not ${row.pinned ? "unpin" : "pin"}: ${e.message}`);
    }
  };
  const liveTitle = store.snapshot ? shownTitle(store).text : "";
  const liveCount = liveEntryCount(store);

  useEffect(() => {
    if (!open) return;
    sessionsApi
      .list(data.agent.name)
      .then((page) => setSessions((before) => {
        const pins = new Set(before.filter((s) => s.pinned).map((s) => s.sessionId));
        const fresh = page.results.filter((s) => s.messageCount || s.title || s.sessionId === current).map((s) => ({ sessionId: s.sessionId, title: s.title, agent: s.agent, updatedAt: s.updatedAt, entryCount: s.entryCount, pinned: pins.has(s.sessionId) }));
        return mergePinned(fresh, before.filter((s) => s.pinned));
      }))
      .catch((e) => setError(e.message));
  }, [open]);

  return html`
    <nav class=${`session-list${open ? " open" : ""}`} aria-label=${t("Sessions")}>
      <div class="session-list-header">
        <h2>${t("Sessions")}</h2>
        <button type="button" class="icon-button drawer-close" onClick=${onClose} aria-label=${t("Close the session list")}>✕</button>
      </div>
      <label class="agent-picker">
        <span>${t("Agent")}</span>
        <select aria-label=${t("Agent")} value=${data.agent.name} onChange=${(e) => window.location.assign(agentUrl(data, e.currentTarget.value))}>
          ${data.agents.map((a) => html`<option value=${a.name} title=${a.description}>${a.name}</option>`)}
        </select>
      </label>
      <button type="button" class="primary new-session" onClick=${onNew}>+ ${t("New session")}</button>
      <${SessionSearch} onResults=${setHits} />
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      ${hits && hits.length === 0 ? html`<p class="muted empty-search" role="status">${t("No session matches.")}</p>` : null}
      <ul class="sessions" aria-label=${hits ? t("Matching sessions") : t("Recent sessions")}>
        ${groups.map((group) => html`
          ${group.label ? html`<li class="session-group" role="presentation" key=${`g-${group.label}`}><h3>${group.label}</h3></li>` : null}
          ${group.sessions.map((s) => html`<li key=${s.sessionId}>
            <a href=${`/sessions/${encodeURIComponent(s.sessionId)}/`} aria-current=${s.sessionId === current ? "page" : undefined} class=${s.sessionId === current ? "current" : ""}>
              <span class="session-name">${s.pinned ? html`<span class="pin-mark" aria-label=${t("pinned")}>★ </span>` : null}${(s.sessionId === current ? liveTitle : null) || s.title || t("Untitled session")}</span>
              <span class="session-meta">${s.agent && s.agent !== data.agent.name ? `${s.agent} · ` : ""}${when(s.updatedAt)} · ${tn("{n} entry", "{n} entries", s.sessionId === current && liveCount !== null ? liveCount : s.entryCount)}</span>
              ${s.snippet ? html`<span class="session-snippet">${s.snippet}</span>` : null}
            </a>
            ${data.readOnly && s.sessionId === current ? null : html`<${SessionRowActions} session=${s} title=${(s.sessionId === current ? liveTitle : null) || s.title} current=${s.sessionId === current} onGone=${onGone} onPin=${hits ? null : () => togglePin(s)} />`}
          </li>`)}`)}
      </ul>
      <${ArchivedSessions} agent=${data.agent.name} current=${current} added=${archivedNow}
        onRestored=${(row) => setSessions((list) => [row, ...list.filter((s) => s.sessionId !== row.sessionId)])} />
    </nav>
  `;
}

/** The agent's recent sessions with the pinned ones (of any agent) added, each once. */
function mergePinned(sessions, pinned = []) {
  const seen = new Set(sessions.map((s) => s.sessionId));
  return [...sessions, ...(pinned ?? []).filter((s) => !seen.has(s.sessionId)).map((s) => ({ ...s, pinned: true }))];
}
