// The keyboard shortcuts dialog: `?` (outside a text field) opens it, Escape closes it.

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { t } from "../i18n.js";

// Key names stay as printed on keyboards; what they do is in the reader's language.
export const SHORTCUTS = () => [
  [t("Composer"), [["Enter", t("send")], ["Shift + Enter", t("new line")], ["Escape", t("give up continuing from a message (clears the text)")]]],
  [t("Tree (when focused)"), [["↑ / ↓, PgUp / PgDn, Home / End", t("move")], ["Enter", t("go there")], ["← / →", t("collapse / expand a branch point")], ["L", t("label")], ["F", t("fork into a new session")]]],
  [t("Page"), [["?", t("these shortcuts")], ["Escape", t("close a drawer or dialog")]]],
];

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

export function Shortcuts() {
  const [open, setOpen] = useState(false);
  const ref = useRef(null);
  useEffect(() => {
    const onKey = (event) => {
      if (event.key === "?" && !event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target)) {
        event.preventDefault();
        setOpen(true);
      }
    };
    const show = () => setOpen(true);
    window.addEventListener("keydown", onKey);
    window.addEventListener("neta:shortcuts", show);
    return () => {
      window.removeEventListener("keydown", onKey);
      window.removeEventListener("neta:shortcuts", show);
    };
  }, []);
  useEffect(() => {
    const dialog = ref.current;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return html`
    <dialog ref=${ref} class="dialog shortcuts" aria-labelledby="shortcuts-title" onClose=${() => setOpen(false)}>
      <h2 id="shortcuts-title">${t("Keyboard shortcuts")}</h2>
      ${SHORTCUTS().map(
        ([group, keys]) => html`<h3 class="shortcut-group">${group}</h3>
          <dl class="shortcut-list">${keys.map(([key, what]) => html`<div class="shortcut"><dt><kbd>${key}</kbd></dt><dd>${what}</dd></div>`)}</dl>`,
      )}
      <div class="button-row"><button type="button" class="primary" onClick=${() => setOpen(false)}>${t("Close")}</button></div>
    </dialog>
  `;
}
