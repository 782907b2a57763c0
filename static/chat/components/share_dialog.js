// *Share* in the top bar: download the session (Pi JSONL, Markdown, an HTML page) and
// read-only share links (made, copied, revoked here; docs/chat.md, "Share").

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { sessionApi } from "../api.js";
import { download, fileName, htmlPage } from "../export_doc.js";
import { copyText } from "./code_block.js";
import { formatDateTime, t, tn } from "../i18n.js";

async function fetchText(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response.text();
}

export function ShareDialog({ sessionId, title, open, onClose, readOnly }) {
  const ref = useRef(null);
  const [links, setLinks] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [copied, setCopied] = useState(null);
  const api = sessionApi(sessionId);
  useEffect(() => {
    const dialog = ref.current;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
    if (open) {
      setError(null);
      api.shares().then((body) => setLinks(body.results)).catch((e) => setError(e.message));
    }
  }, [open]);
  const exportUrl = (format) => `/api/sessions/${encodeURIComponent(sessionId)}/export/${format ? `?as=${format}` : ""}`;
  const save = async (kind) => {
    setError(null);
    try {
      if (kind === "markdown") download(fileName(title, "md"), await fetchText(exportUrl("markdown")), "text/markdown");
      else download(fileName(title, "html"), htmlPage(title, await fetchText(exportUrl("markdown"))), "text/html");
    } catch (e) {
      setError(t("Could not download: {error}", { error: e.message }));
    }
  };
  const share = async () => {
    setBusy(true);
    setError(null);
    try {
      const link = await api.share();
      setLinks((now) => [link, ...(now ?? [])]);
      await copy(link);
    } catch (e) {
      setError(t("Could not make a link: {error}", { error: e.message }));
    } finally {
      setBusy(false);
    }
  };
  const copy = async (link) => {
    await copyText(new URL(link.url, window.location.origin).href);
    setCopied(link.id);
    setTimeout(() => setCopied(null), 1500);
  };
  const revoke = async (link) => {
    try {
      const done = await api.unshare(link.id);
      setLinks((now) => now.map((l) => (l.id === link.id ? done : l)));
    } catch (e) {
      setError(t("Could not revoke: {error}", { error: e.message }));
    }
  };
  const live = (links ?? []).filter((l) => !l.revokedAt);
  return html`
    <dialog ref=${ref} class="dialog share-dialog" aria-labelledby="share-title" onClose=${onClose}>
      <h2 id="share-title">${t("Share and download")}</h2>
      <h3 class="dialog-section">${t("Download")}</h3>
      <div class="button-row">
        <a class="button-link" href=${exportUrl("")} download>${t("Pi session (JSONL)")}</a>
        <button type="button" onClick=${() => save("markdown")}>Markdown</button>
        <button type="button" onClick=${() => save("html")}>${t("HTML page")}</button>
      </div>
      <h3 class="dialog-section">${t("Read-only link")}</h3>
      <p class="muted small-text">${t("Anyone with the link sees this conversation as it is now (the current branch), without signing in. Later messages are not shown; revoking stops the link at once.")}</p>
      ${readOnly ? null : html`<div class="button-row"><button type="button" class="primary" disabled=${busy} onClick=${share}>${busy ? t("Making a link…") : t("Make a link and copy it")}</button></div>`}
      ${live.length
        ? html`<ul class="share-links" aria-label=${t("Share links")}>
            ${live.map((link) => html`<li key=${link.id}>
              <a href=${link.url} target="_blank" rel="noopener">${new URL(link.url, window.location.origin).href}</a>
              <span class="muted">${formatDateTime(link.createdAt)} · ${tn("{n} view", "{n} views", link.views)}</span>
              <button type="button" class="small" onClick=${() => copy(link)}>${copied === link.id ? t("Copied") : t("Copy")}</button>
              ${readOnly ? null : html`<button type="button" class="small danger-text" onClick=${() => revoke(link)}>${t("Revoke")}</button>`}
            </li>`)}
          </ul>`
        : links !== null
          ? html`<p class="muted small-text">${t("No live link.")}</p>`
          : null}
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      <div class="button-row dialog-close-row"><button type="button" onClick=${() => ref.current?.close()}>${t("Close")}</button></div>
    </dialog>
  `;
}
