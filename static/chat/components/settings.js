// *Settings* (the top bar): the user's custom instructions — added to the system prompt of
// every run in their sessions, after the agent's own prompt — and Enter-sends.

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { api } from "../api.js";
import { ThemeToggle } from "./theme_toggle.js";

export function SettingsDialog({ open, onClose, enterSends, setEnterSends, data }) {
  const ref = useRef(null);
  const [text, setText] = useState(null);
  const [max, setMax] = useState(4000);
  const [status, setStatus] = useState(null);
  useEffect(() => {
    const dialog = ref.current;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
    if (open) {
      setStatus(null);
      api("me/settings/").then((body) => {
        setText(body.customInstructions ?? "");
        setMax(body.maxCustomInstructions ?? 4000);
      }).catch((e) => setStatus({ kind: "error", text: e.message }));
    }
  }, [open]);
  const save = async (event) => {
    event.preventDefault();
    try {
      const body = await api("me/settings/", { method: "PUT", body: { customInstructions: text ?? "" } });
      setText(body.customInstructions);
      setStatus({ kind: "info", text: "Saved: your next answers follow them." });
    } catch (e) {
      setStatus({ kind: "error", text: `Could not save: ${e.message}` });
    }
  };
  return html`
    <dialog ref=${ref} class="dialog settings-dialog" aria-labelledby="settings-title" onClose=${onClose}>
      ${open ? html`<form onSubmit=${save}>
        <h2 id="settings-title">Settings</h2>
        <label for="custom-instructions" class="dialog-section">Custom instructions</label>
        <p class="muted small-text" id="custom-instructions-help">Added to the system prompt of every answer in your sessions, after the agent's own prompt: how you like answers, what to know about you.</p>
        <textarea id="custom-instructions" aria-describedby="custom-instructions-help" rows="6" maxlength=${max} value=${text ?? ""} disabled=${text === null}
          placeholder="e.g. Answer briefly. I work in Python and Django." onInput=${(e) => setText(e.currentTarget.value)}></textarea>
        <div class="muted small-text">${(text ?? "").length} / ${max}</div>
        <label class="settings-check"><input type="checkbox" checked=${enterSends} onChange=${(e) => setEnterSends(e.currentTarget.checked)} /> Enter sends (off: Enter is a new line, Ctrl+Enter or Send sends)</label>
        ${status ? html`<div class=${status.kind === "error" ? "form-error" : "notice-inline"} role=${status.kind === "error" ? "alert" : "status"}>${status.text}</div>` : null}
        <div class="settings-row"><span>Theme</span><${ThemeToggle} username=${data.user.username} /></div>
        <div class="button-row dialog-close-row">
          <button type="submit" class="primary" disabled=${text === null}>Save</button>
          <button type="button" onClick=${() => ref.current?.close()}>Close</button>
        </div>
      </form>
      <form method="post" action=${data.urls.logout} class="settings-signout">
        <input type="hidden" name="csrfmiddlewaretoken" value=${decodeURIComponent(document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "")} />
        <button type="submit" class="link-button">Sign out (${data.user.username})</button>
      </form>` : null}
    </dialog>
  `;
}
