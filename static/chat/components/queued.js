// The follow-up and steer messages queued on the running agent, shown above the composer
// until the run takes them into the tree (or ends).

import { useEffect } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { stillQueued } from "../composer_model.js";
import { t } from "../i18n.js";

export function QueuedMessages({ store, queued, setQueued }) {
  useStore(store, ["tree", "run"]);
  const entries = store.snapshot?.entries ?? [];
  const left = stillQueued(queued, entries, store.running);
  useEffect(() => {
    if (left !== queued) setQueued(left);
  }, [left, queued]);
  if (!left.length) return null;
  return html`
    <ul class="queued" aria-label=${t("Queued messages")}>
      ${left.map(
        (item) => html`<li key=${item.id} class="queued-item">
          <span class=${`queued-mode queued-${item.mode}`}>${item.mode === "steer" ? t("Steer") : t("Follow-up")}</span>
          <span class="queued-text">${item.text}</span>
          <span class="muted">${t("waiting for the agent")}</span>
        </li>`,
      )}
    </ul>
  `;
}
