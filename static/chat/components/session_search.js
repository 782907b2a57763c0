// The session list's search, a row's archive and delete, and the archived sessions.
//
// Search asks the API (`GET /api/sessions/search/?q=`: titles and message text, bounded)
// once typing pauses; archive and delete ask for confirmation first, then go through
// the API (PATCH status, DELETE). Leaving the session shown for a new one after
// deleting or archiving it.

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { sessionApi, sessionsApi } from "../api.js";
import { t, tn } from "../i18n.js";

const PAUSE_MS = 250;

/** The search box (every session of yours, whatever its agent); `onResults(null)` when cleared, else the hits. */
export function SessionSearch({ agent = null, onResults }) {
  const [query, setQuery] = useState("");
  const [error, setError] = useState(null);
  const timer = useRef(null);
  const asked = useRef(0);
  useEffect(() => {
    clearTimeout(timer.current);
    const q = query.trim();
    if (!q) {
      setError(null);
      onResults(null);
      return undefined;
    }
    timer.current = setTimeout(async () => {
      const mine = ++asked.current;
      try {
        const page = await sessionsApi.search(agent, q.slice(0, 200));
        if (mine === asked.current) {
          setError(null);
          onResults(page.results);
        }
      } catch (e) {
        if (mine === asked.current) setError(e.message);
      }
    }, PAUSE_MS);
    return () => clearTimeout(timer.current);
  }, [query]);
  return html`
    <div class="session-search">
      <label for="session-search-input" class="visually-hidden">${t("Search sessions")}</label>
      <input id="session-search-input" type="search" placeholder=${t("Search all your sessions")} maxlength="200" value=${query}
        onInput=${(e) => setQuery(e.currentTarget.value)} onKeyDown=${(e) => e.key === "Escape" && setQuery("")} />
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
    </div>
  `;
}

/** Archive or delete, after a confirmation in a modal dialog. */
export function SessionRowActions({ session, title: shownTitle, current, onGone, onPin = null }) {
  const [asking, setAsking] = useState(null); // "archive" | "delete" | null
  const [error, setError] = useState(null);
  const dialog = useRef(null);
  useEffect(() => {
    const el = dialog.current;
    if (asking && el && !el.open) el.showModal();
    if (!asking && el?.open) el.close();
  }, [asking]);
  const title = shownTitle || session.title || t("Untitled session");
  const confirm = async () => {
    try {
      const api = sessionApi(session.sessionId);
      if (asking === "delete") await api.remove();
      else await api.archive();
      const what = asking;
      setAsking(null);
      onGone(session.sessionId, what);
    } catch (e) {
      setError(e.message);
    }
  };
  return html`
    <span class="session-actions">
      ${onPin ? html`<button type="button" class="icon-button" aria-label=${session.pinned ? t("Unpin {title}", { title }) : t("Pin {title}", { title })} aria-pressed=${Boolean(session.pinned)} title=${session.pinned ? t("Unpin") : t("Pin to the top")} onClick=${onPin}>${session.pinned ? "★" : "☆"}</button>` : null}
      <button type="button" class="icon-button" aria-label=${t("Archive {title}", { title })} title=${t("Archive")} onClick=${() => { setError(null); setAsking("archive"); }}>${t("Archive")}</button>
      <button type="button" class="icon-button danger-text" aria-label=${t("Delete {title}", { title })} title=${t("Delete")} onClick=${() => { setError(null); setAsking("delete"); }}>${t("Delete")}</button>
      <dialog ref=${dialog} class="dialog" aria-labelledby=${`confirm-${session.sessionId}`} onCancel=${(e) => { e.preventDefault(); setAsking(null); }}>
        <h2 id=${`confirm-${session.sessionId}`}>${asking === "delete" ? t("Delete this session?") : t("Archive this session?")}</h2>
        <p><strong>${title}</strong></p>
        <p>${asking === "delete"
          ? t("Its whole tree, every branch and its runs are deleted for good.")
          : t("It leaves the list; it is kept, and its address still opens it.")}${current ? ` ${t("You are in it now: a new session opens.")}` : ""}</p>
        ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
        <div class="button-row">
          <button type="button" class=${asking === "delete" ? "danger" : "primary"} onClick=${confirm}>${asking === "delete" ? t("Delete") : t("Archive")}</button>
          <button type="button" class="link-button" onClick=${() => { dialog.current?.close(); setAsking(null); }}>${t("Cancel")}</button>
        </div>
      </dialog>
    </span>
  `;
}

/**
 * The agent's archived sessions, folded under the list: each opens (its address still
 * works) or comes back with *Restore* (`PATCH {status: "active"}`, the same service as the
 * API). `added`: a row archived from the list just now.
 */
export function ArchivedSessions({ agent, current, added, onRestored }) {
  const [open, setOpen] = useState(false);
  const [rows, setRows] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (!open) return;
    setError(null);
    sessionsApi
      .archived(agent)
      .then((page) => setRows(page.results.map((s) => ({ sessionId: s.sessionId, title: s.title, updatedAt: s.updatedAt, entryCount: s.entryCount }))))
      .catch((e) => setError(e.message));
  }, [open]);
  useEffect(() => {
    if (added && rows) setRows((list) => [added, ...list.filter((s) => s.sessionId !== added.sessionId)]);
  }, [added]);
  const restore = async (row) => {
    setError(null);
    try {
      await sessionApi(row.sessionId).restore();
      setRows((list) => list.filter((s) => s.sessionId !== row.sessionId));
      onRestored({ ...row, status: "active" });
      if (row.sessionId === current) window.location.reload(); // the page says it is archived: no more
    } catch (e) {
      setError(t("Could not restore: {error}", { error: e.message }));
    }
  };
  return html`
    <div class="archived-sessions">
      <button type="button" class="link-button archived-toggle" aria-expanded=${open} aria-controls="archived-list" onClick=${() => setOpen(!open)}>
        ${open ? "▾" : "▸"} ${t("Archived")}
      </button>
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      ${open
        ? rows === null
          ? html`<p class="muted archived-empty">${t("Loading…")}</p>`
          : rows.length === 0
            ? html`<p class="muted archived-empty" role="status">${t("No archived session.")}</p>`
            : html`<ul class="sessions archived" id="archived-list" aria-label=${t("Archived sessions")}>
                ${rows.map((s) => html`<li key=${s.sessionId}>
                  <a href=${`/sessions/${encodeURIComponent(s.sessionId)}/`} aria-current=${s.sessionId === current ? "page" : undefined} class=${s.sessionId === current ? "current" : ""}>
                    <span class="session-name">${s.title || t("Untitled session")}</span>
                    <span class="muted session-meta">${tn("{n} entry", "{n} entries", s.entryCount)}</span>
                  </a>
                  <button type="button" class="small restore-button" aria-label=${t("Restore {title}", { title: s.title || t("Untitled session") })} onClick=${() => restore(s)}>${t("Restore")}</button>
                </li>`)}
              </ul>`
        : null}
    </div>
  `;
}

/** Over the conversation of an archived session: it can be read and restored. */
export function ArchivedBanner({ session, readOnly = false }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  if (session?.status !== "archived") return null;
  const restore = async () => {
    setBusy(true);
    try {
      await sessionApi(session.sessionId).restore();
      window.location.reload();
    } catch (e) {
      setError(t("Could not restore: {error}", { error: e.message }));
      setBusy(false);
    }
  };
  return html`
    <div class="branch-banner archived-banner" role="status">
      <span>${t("This session is archived: it is not in the session list.")}</span>
      ${readOnly ? null : html`<button type="button" class="small" disabled=${busy} onClick=${restore}>${t("Restore")}</button>`}
      ${error ? html`<span class="form-error" role="alert">${error}</span>` : null}
    </div>
  `;
}
