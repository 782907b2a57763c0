// The theme button in the top bar: system → light → dark.

import { useState } from "preact/hooks";
import { html } from "./html.js";
import { applyTheme, nextTheme, storedTheme, THEME_LABELS } from "../theme.js";

const ICONS = { system: "◐", light: "☀", dark: "☾" };

export function ThemeToggle({ username }) {
  const [theme, setTheme] = useState(() => storedTheme(username));
  const change = () => {
    const next = nextTheme(theme);
    applyTheme(next, username);
    setTheme(next);
  };
  return html`<button type="button" class="icon-button theme-toggle" data-theme-choice=${theme} aria-label=${`${THEME_LABELS[theme]} (change)`} title=${`${THEME_LABELS[theme]}: click for ${THEME_LABELS[nextTheme(theme)].toLowerCase()}`} onClick=${change}>${ICONS[theme]}</button>`;
}
