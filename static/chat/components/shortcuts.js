// The keyboard shortcuts dialog: `?` (outside a text field) opens it, Escape closes it.

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";

export const SHORTCUTS = [
  ["Composer", [["Enter", "send"], ["Shift + Enter", "new line"], ["Escape", "give up continuing from a message (clears the text)"]]],
  ["Tree (when focused)", [["↑ / ↓, PgUp / PgDn, Home / End", "move"], ["Enter", "go there"], ["← / →", "collapse / expand a branch point"], ["L", "label"], ["F", "fork into a new session"]]],
  ["Page", [["?", "these shortcuts"], ["Escape", "close a drawer or dialog"]]],
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
      <h2 id="shortcuts-title">Keyboard shortcuts</h2>
      ${SHORTCUTS.map(
        ([group, keys]) => html`<h3 class="shortcut-group">${group}</h3>
          <dl class="shortcut-list">${keys.map(([key, what]) => html`<div class="shortcut"><dt><kbd>${key}</kbd></dt><dd>${what}</dd></div>`)}</dl>`,
      )}
      <div class="button-row"><button type="button" class="primary" onClick=${() => setOpen(false)}>Close</button></div>
    </dialog>
  `;
}
