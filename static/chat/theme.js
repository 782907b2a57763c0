// Light, dark or the system's theme, remembered per user in this browser.
//
// The choice is `data-theme` on <html> ("light" / "dark"; absent = follow the
// system); base.html sets it before the first paint from the same key, so a
// reload never flashes the other theme. chat.css holds the colours of both.

export const THEMES = ["system", "light", "dark"];
export const THEME_LABELS = { system: "System theme", light: "Light theme", dark: "Dark theme" };

export function themeKey(username) {
  return `neta.theme.${username ?? ""}`;
}

export function storedTheme(username) {
  try {
    const value = localStorage.getItem(themeKey(username));
    return THEMES.includes(value) ? value : "system";
  } catch {
    return "system";
  }
}

export function nextTheme(theme) {
  return THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
}

/** Apply `theme` to the page (and the highlight.js sheet that matches it) and remember it. */
export function applyTheme(theme, username, { remember = true } = {}) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
  for (const link of document.querySelectorAll("link[data-theme-sheet]")) {
    const sheet = link.dataset.themeSheet;
    link.media = theme === "system" ? `(prefers-color-scheme: ${sheet})` : sheet === theme ? "all" : "not all";
  }
  if (!remember) return;
  try {
    if (theme === "system") localStorage.removeItem(themeKey(username));
    else localStorage.setItem(themeKey(username), theme);
  } catch {
    /* private mode: this page keeps it */
  }
}
