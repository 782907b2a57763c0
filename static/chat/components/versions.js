// Versions in the conversation: the `‹ 2/3 ›` switcher on a message with
// siblings, "Regenerate" on an answer, and "Edit" in place on a user message.
//
// The switcher reads the tree itself (its own store subscription), so a new sibling
// shows at once although the message's item only re-renders when its entry changes.

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useBusy, useStore } from "./hooks.js";
import { stepVersion, versionsOf } from "../versions_model.js";
import { t } from "../i18n.js";

/** Renders `children(busy)`: busy while a run is active (moves in the tree wait for it). */
export function RunBlocked({ store, children }) {
  return children(useBusy(store));
}

export function VersionSwitcher({ entry, store, actions }) {
  useStore(store, ["tree"]);
  const busy = useBusy(store);
  const snapshot = store.snapshot ? store.treeSnapshot() : null;
  const versions = snapshot ? versionsOf(snapshot, (id) => store.entry(id), entry.id) : null;
  if (!versions) return null;
  const { ids, index } = versions;
  const why = busy ? ` ${t("(available when the run ends)")}` : "";
  const go = (step) => {
    const target = stepVersion(snapshot, (id) => store.entry(id), entry.id, step);
    if (target) actions.switchVersion(target);
  };
  return html`
    <span class="versions" role="group" aria-label=${t("Version {n} of {all}", { n: index + 1, all: ids.length })}>
      <button type="button" class="icon-button version-step" aria-label=${t("Previous version")} title=${`${t("Previous version")}${why}`} disabled=${index === 0 || busy} onClick=${() => go(-1)}>‹</button>
      <span class="version-count" aria-hidden="true">${index + 1}/${ids.length}</span>
      <button type="button" class="icon-button version-step" aria-label=${t("Next version")} title=${`${t("Next version")}${why}`} disabled=${index === ids.length - 1 || busy} onClick=${() => go(+1)}>›</button>
    </span>
  `;
}

export function RegenerateButton({ entry, actions, store }) {
  return html`<${RunBlocked} store=${store}>${(busy) => html`<button type="button" class="icon-button" disabled=${busy} onClick=${() => actions.regenerate(entry.id)}
    title=${busy ? t("Available when the run ends") : t("A new answer to the same message (the old one stays as a version)")}>${t("Regenerate")}</button>`}<//>`;
}

/** The user message's text as an editor: Save sends it as a sibling message, Escape gives up. */
export function EditInPlace({ text, onSave, onCancel }) {
  const [value, setValue] = useState(text);
  const [busy, setBusy] = useState(false);
  const area = useRef(null);
  // Before the first paint (a layout effect): an effect runs a frame later and would move
  // the caret or selection under keys already typed into the field.
  useLayoutEffect(() => {
    const el = area.current;
    if (!el) return;
    el.focus();
    el.setSelectionRange(el.value.length, el.value.length);
  }, []);
  const save = async () => {
    if (!value.trim() || busy) return;
    setBusy(true);
    try {
      if ((await onSave(value)) === false) setBusy(false);
    } catch {
      setBusy(false);
    }
  };
  const onKeyDown = (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      onCancel();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      save();
    }
  };
  return html`
    <form class="edit-in-place" onSubmit=${(e) => { e.preventDefault(); save(); }}>
      <label class="visually-hidden" for="edit-in-place-input">${t("Edit the message")}</label>
      <textarea id="edit-in-place-input" ref=${area} rows=${Math.min(12, Math.max(2, value.split("\n").length))} value=${value} onInput=${(e) => setValue(e.currentTarget.value)} onKeyDown=${onKeyDown}></textarea>
      <div class="button-row">
        <span class="muted small">${t("Sent as a new version of this message; the old one stays.")}</span>
        <button type="button" class="small" onClick=${onCancel}>${t("Cancel")}</button>
        <button type="submit" class="primary small" disabled=${!value.trim() || busy}>${t("Save and send")}</button>
      </div>
    </form>
  `;
}
