// *Settings* (the top bar): the user's custom instructions — added to the system prompt of
// every run in their sessions, after the agent's own prompt — and Enter-sends.

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { api } from "../api.js";
import { ThemeToggle } from "./theme_toggle.js";
import { language, t } from "../i18n.js";

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
      setStatus({ kind: "info", text: t("Saved: your next answers follow them.") });
    } catch (e) {
      setStatus({ kind: "error", text: t("Could not save: {error}", { error: e.message }) });
    }
  };
  return html`
    <dialog ref=${ref} class="dialog settings-dialog" aria-labelledby="settings-title" onClose=${onClose}>
      ${open ? html`<form onSubmit=${save}>
        <h2 id="settings-title">${t("Settings")}</h2>
        <label for="custom-instructions" class="dialog-section">${t("Custom instructions")}</label>
        <p class="muted small-text" id="custom-instructions-help">${t("Added to the system prompt of every answer in your sessions, after the agent's own prompt: how you like answers, what to know about you.")}</p>
        <textarea id="custom-instructions" aria-describedby="custom-instructions-help" rows="6" maxlength=${max} value=${text ?? ""} disabled=${text === null}
          placeholder=${t("e.g. Answer briefly. I work in Python and Django.")} onInput=${(e) => setText(e.currentTarget.value)}></textarea>
        <div class="muted small-text">${(text ?? "").length} / ${max}</div>
        <label class="settings-check"><input type="checkbox" checked=${enterSends} onChange=${(e) => setEnterSends(e.currentTarget.checked)} /> ${t("Enter sends (off: Enter is a new line, Ctrl+Enter or Send sends)")}</label>
        ${status ? html`<div class=${status.kind === "error" ? "form-error" : "notice-inline"} role=${status.kind === "error" ? "alert" : "status"}>${status.text}</div>` : null}
        <div class="settings-row"><span>${t("Theme")}</span><${ThemeToggle} username=${data.user.username} /></div>
        <div class="button-row dialog-close-row">
          <button type="submit" class="primary" disabled=${text === null}>${t("Save")}</button>
          <button type="button" onClick=${() => ref.current?.close()}>${t("Close")}</button>
        </div>
      </form>
      <${LanguageForm} data=${data} />
      <form method="post" action=${data.urls.logout} class="settings-signout">
        <input type="hidden" name="csrfmiddlewaretoken" value=${decodeURIComponent(document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "")} />
        <button type="submit" class="link-button">${t("Sign out ({user})", { user: data.user.username })}</button>
      </form>` : null}
    </dialog>
  `;
}

function csrfToken() {
  return decodeURIComponent(document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "");
}

/** The language of the pages and messages: the user's setting (runtime/pages/language.py);
 * choosing one reloads the page in it. */
export function LanguageForm({ data }) {
  const languages = data.languages ?? [];
  if (!languages.length || !data.urls.language) return null;
  return html`
    <form method="post" action=${data.urls.language} class="settings-language" data-language-switch>
      <input type="hidden" name="csrfmiddlewaretoken" value=${csrfToken()} />
      <input type="hidden" name="next" value=${window.location.pathname} />
      <label class="settings-row"><span>${t("Language")}</span>
        <select name="language" value=${language()} onChange=${(e) => e.currentTarget.form.submit()}>
          <option value="">${t("The browser's language")}</option>
          ${languages.map((l) => html`<option value=${l.code} lang=${l.code}>${l.name}</option>`)}
        </select>
      </label>
    </form>
  `;
}
