// Modal dialogs (the native <dialog> element: focus trap and Escape for free).

import { useEffect, useRef } from "preact/hooks";
import { html } from "./html.js";
import { t, tn } from "../i18n.js";

export function SummarizeDialog({ request, onAnswer }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (request && !dialog.open) dialog.showModal();
    if (!request && dialog.open) dialog.close();
  }, [request]);
  return html`
    <dialog ref=${ref} class="dialog" aria-labelledby="summarize-title" onCancel=${(e) => { e.preventDefault(); onAnswer(null); }}>
      <h2 id="summarize-title">${t("Summarize the branch you are leaving?")}</h2>
      <p>${request?.left ? `${tn("The branch you leave holds {n} message.", "The branch you leave holds {n} messages.", request.left)} ` : ""}${t("A summary keeps what was learned there in the context of the new branch. The branch itself stays in the tree either way.")}</p>
      ${request?.target ? html`<p class="muted">${t("Going to:")} ${request.target}</p>` : null}
      <div class="button-row">
        <button type="button" class="primary" onClick=${() => onAnswer(true)}>${t("Summarize and switch")}</button>
        <button type="button" onClick=${() => onAnswer(false)}>${t("Switch without summary")}</button>
        <button type="button" class="link-button" onClick=${() => onAnswer(null)}>${t("Cancel")}</button>
      </div>
    </dialog>
  `;
}
