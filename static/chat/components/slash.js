// Slash commands in the composer: `/compact [instructions]`, `/fork`,
// `/name <title>`, `/tree`, offered as you type a slash (↑/↓ pick, Tab or Enter
// complete, Escape closes). What each does is the page's (`app.js`, runCommand).

import { useState } from "preact/hooks";
import { html } from "./html.js";
import { completeSlash, slashSuggestions } from "../composer_model.js";
import { t } from "../i18n.js";

/** The completion menu for `text` and the key handler the composer asks first. */
export function useSlashMenu(text, setText) {
  const [selected, setSelected] = useState(0);
  const [closedFor, setClosedFor] = useState(null);
  const suggestions = closedFor === text ? [] : slashSuggestions(text);
  const index = Math.min(selected, Math.max(0, suggestions.length - 1));
  const pick = (command) => {
    setText(completeSlash(command));
    setSelected(0);
  };
  const onKeyDown = (event) => {
    if (!suggestions.length) return false;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      setSelected((index + step + suggestions.length) % suggestions.length);
      return true;
    }
    if (event.key === "Escape") {
      event.preventDefault();
      setClosedFor(text);
      return true;
    }
    const complete = event.key === "Tab" || (event.key === "Enter" && !event.shiftKey);
    if (complete && completeSlash(suggestions[index]) !== text) {
      event.preventDefault();
      pick(suggestions[index]);
      return true;
    }
    return false;
  };
  const menu = suggestions.length
    ? html`<ul class="slash-menu" role="listbox" id="slash-menu" aria-label=${t("Commands")}>
        ${suggestions.map(
          (c, i) => html`<li key=${c.name} role="option" id=${`slash-${c.name}`} aria-selected=${i === index} class=${i === index ? "selected" : ""}
              onMouseDown=${(e) => { e.preventDefault(); pick(c); }}>
            <span class="slash-name">/${c.name}</span>${c.args ? html` <span class="slash-args">${c.args}</span>` : null}
            <span class="muted slash-help">${c.help}</span>
          </li>`,
        )}
      </ul>`
    : null;
  return { menu, onKeyDown, open: suggestions.length > 0, activeId: suggestions.length ? `slash-${suggestions[index].name}` : undefined };
}
