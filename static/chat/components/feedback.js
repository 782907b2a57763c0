// 👍 / 👎 on an answer, with an optional note: stored in the tree as a Pi `custom` entry
// (customType "neta.feedback": it never enters the model's context), shown by the console's
// run page. The latest feedback on an answer is the one that counts.

import { useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { feedbackFor } from "../feedback_model.js";
import { t } from "../i18n.js";

// Drawn, not emoji: every system has the shapes, not every one has an emoji font.
const THUMB = "M2 10h3v10H2zM7 20h9.2a2 2 0 0 0 2-1.6l1.6-7A2 2 0 0 0 17.8 9H13l.8-4.2A1.8 1.8 0 0 0 12 3L7 9.5z";

function Thumb({ down }) {
  return html`<svg class="thumb" viewBox="0 0 22 22" width="16" height="16" aria-hidden="true" style=${down ? "transform: rotate(180deg)" : undefined}><path d=${THUMB} fill="currentColor" /></svg>`;
}

export function FeedbackButtons({ entryId, store, actions }) {
  useStore(store, ["tree"]);
  const [asking, setAsking] = useState(null); // the rating whose note is being written
  const [note, setNote] = useState("");
  const given = feedbackFor(store.treeSnapshot(), (id) => store.entry(id), entryId);
  if (store.readOnly) return null;
  const send = async (rating, text) => {
    setAsking(null);
    setNote("");
    await actions.feedback(entryId, rating, text);
  };
  const button = (rating, down, name) => html`<button type="button" class=${`icon-button feedback-button${given?.rating === rating ? " chosen" : ""}`}
    aria-pressed=${given?.rating === rating} aria-label=${name} title=${name}
    onClick=${() => (given?.rating === rating ? send(null, "") : setAsking(rating))}><${Thumb} down=${down} /></button>`;
  return html`
    <span class="feedback" role="group" aria-label=${t("Feedback on this answer")}>
      ${button("up", false, t("Good answer"))}${button("down", true, t("Bad answer"))}
      ${asking
        ? html`<form class="feedback-note" onSubmit=${(e) => { e.preventDefault(); send(asking, note.trim()); }}>
            <label class="visually-hidden" for=${`feedback-note-${entryId}`}>${t("A note (optional)")}</label>
            <input id=${`feedback-note-${entryId}`} maxlength="1000" placeholder=${asking === "up" ? t("What was good? (optional)") : t("What went wrong? (optional)")} value=${note}
              onInput=${(e) => setNote(e.currentTarget.value)} onKeyDown=${(e) => e.key === "Escape" && setAsking(null)} ref=${(el) => el && !el.dataset.focused && (el.dataset.focused = "1", el.focus())} />
            <button type="submit" class="small">${t("Send")}</button>
          </form>`
        : null}
    </span>
  `;
}
