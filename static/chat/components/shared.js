// The read-only page of a share link (`/share/<token>/`): the shared path as the chat page
// draws it, with no socket, no composer and no actions but Copy. The entries come with the
// page (runtime/pages/views.py::share_page).

import { html } from "./html.js";
import { Conversation } from "./conversation.js";
import { ThemeToggle } from "./theme_toggle.js";
import { ROOT_KEY } from "../tree_events.js";
import { formatDateTime, t } from "../i18n.js";

/** A snapshot of a path alone (what the store and the conversation read). */
export function pathSnapshot(share) {
  const entries = Array.isArray(share.entries) ? share.entries : [];
  const childrenByParentId = {};
  for (const entry of entries) (childrenByParentId[typeof entry.parentId === "string" ? entry.parentId : ROOT_KEY] ??= []).push(entry.id);
  return {
    session: { sessionId: null, title: share.title, agent: share.agent, status: "active" },
    revision: 0,
    leafId: entries.length ? entries[entries.length - 1].id : null,
    entries,
    activePath: entries.map((e) => e.id),
    childrenByParentId,
    labelsByEntryId: {},
    inFlight: null,
    runtimeContext: {},
    page: null,
  };
}

const NO_ACTIONS = new Proxy({}, { get: () => () => {} });

export function SharedApp({ data, store }) {
  const share = data.share;
  return html`
    <div class="app">
      <header class="topbar">
        <span class="brand">Neta</span>
        <h1 class="session-title" title=${share.title}>${share.title}</h1>
        <span class="spacer"></span>
        <${ThemeToggle} username="" />
      </header>
      <p class="shared-banner">${t("A read-only copy shared on {date} · agent {agent}", { date: formatDateTime(share.sharedAt), agent: share.agent })}</p>
      <main class="chat" id="main">
        <${Conversation} store=${store} actions=${NO_ACTIONS} agent=${null} />
      </main>
    </div>
  `;
}
