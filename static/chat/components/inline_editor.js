// A one-line editor in place of a text (a label, the session title): Enter or Save
// submits, Escape or Cancel gives up. The text lives in state: the page re-renders
// whenever a patch arrives, and an input bound to `initial` would be reset under
// the user's fingers.

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { t } from "../i18n.js";

export function InlineEditor({ id, label, initial, placeholder, maxLength, className = "", onDone }) {
  const [text, setText] = useState(initial);
  const input = useRef(null);
  // Before the first paint (a layout effect): an effect runs a frame later and would move
  // the caret or selection under keys already typed into the field.
  useLayoutEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, []);
  const submit = (event) => {
    event.preventDefault();
    onDone(text.trim());
  };
  return html`
    <form class=${`inline-editor ${className}`} onSubmit=${submit}>
      <label for=${id} class="visually-hidden">${label}</label>
      <input
        id=${id}
        ref=${input}
        maxlength=${maxLength}
        value=${text}
        onInput=${(e) => setText(e.currentTarget.value)}
        placeholder=${placeholder}
        onKeyDown=${(e) => e.key === "Escape" && onDone(null)}
      />
      <button type="submit" class="primary small">${t("Save")}</button>
      <button type="button" class="small" onClick=${() => onDone(null)}>${t("Cancel")}</button>
    </form>
  `;
}
