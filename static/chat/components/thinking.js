// Thinking: collapsed, with how long it took ("Thought for 2.3 s", thinking_time.js); the
// parent's answers and the children's streams draw the same component.

import { useState } from "preact/hooks";
import { html } from "./html.js";
import { formatDuration, thinkingMs, thinkingSince } from "../thinking_time.js";
import { t, tn } from "../i18n.js";

export function Thinking({ text, streaming, entryId = null, index = 0 }) {
  const [open, setOpen] = useState(false);
  const took = entryId ? thinkingMs(entryId, index) : null;
  const since = streaming && took === null && entryId ? thinkingSince(entryId, index) : null;
  const label = took !== null ? t("Thought for {duration}", { duration: formatDuration(took) }) : streaming ? t("Thinking…") : t("Thinking");
  return html`
    <details class=${`thinking state-${streaming && took === null ? "running" : "done"}`} open=${open} onToggle=${(e) => setOpen(e.currentTarget.open)} data-thinking-ms=${took ?? undefined}>
      <summary>${label}<span class="muted"> · ${since !== null ? `${formatDuration(performance.now() - since)} · ` : ""}${tn("{n} character", "{n} characters", text.length)}</span></summary>
      ${open ? html`<div class="thinking-text">${text}</div>` : null}
    </details>
  `;
}
