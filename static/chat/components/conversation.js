// The conversation: the active path as a stable list, the streaming message in its
// own container below it (streaming never re-renders the list).

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { AssistantBlocks, EntryItem } from "./messages.js";
import { frameThrottle, useStore } from "./hooks.js";
import { conversationItems } from "../conversation_model.js";
import { liveMessage } from "../streaming.js";
import { HeldBatches, SubagentPanel } from "./subagent_panel.js";

const PAGE = 60;

function StableList({ store, actions, onItems }) {
  useStore(store, ["leaf", "tree"]);
  const snapshot = store.snapshot ? store.treeSnapshot() : null; // with any older entries paged in
  const [limit, setLimit] = useState(PAGE);
  const items = useMemo(
    () => (snapshot ? conversationItems(snapshot, (id) => store.entry(id)) : []),
    [snapshot?.activePath, snapshot?.entries, snapshot?.inFlight],
  );
  useEffect(() => onItems(items.length), [items]);
  if (!snapshot) return html`<p class="empty-state" role="status">Connecting…</p>`;
  const hidden = Math.max(0, items.length - limit);
  const truncated = snapshot.page?.activePathTruncated;
  const labels = snapshot.labelsByEntryId;
  return html`
    <div class="stable-list">
      ${hidden > 0 || truncated
        ? html`<div class="earlier">
            ${hidden > 0 ? html`<button type="button" class="link-button" onClick=${() => setLimit(limit + PAGE * 2)}>Show ${Math.min(hidden, PAGE * 2)} earlier of ${hidden} hidden</button>` : null}
            ${truncated && hidden === 0
              ? html`<span class="muted">Older entries of this path are not loaded (${snapshot.page.activePathLength} in all).</span>
                  ${store.older.below > 0
                    ? html`<button type="button" class="link-button" disabled=${store.older.loading} onClick=${() => actions.loadOlder()}>${store.older.loading ? "Loading…" : "Load older messages"}</button>`
                    : null}`
              : null}
          </div>`
        : null}
      ${items.length === 0 ? html`<p class="empty-state">No messages yet. Ask something below.</p>` : null}
      ${items.slice(hidden).map((item) => html`<${EntryItem} key=${item.id} item=${item} label=${labels[item.id] ?? null} actions=${actions} store=${store} />`)}
    </div>
  `;
}

function LiveMessage({ store }) {
  useStore(store, ["live", "run", "tree"]);
  const live = store.live;
  const batch = store.snapshot?.inFlight?.type === "subagent_batch" ? store.snapshot.inFlight : null;
  if (!live) {
    if (batch) return html`<${SubagentPanel} store=${store} entry=${batch} inFlight=${true} />`;
    if (store.running && store.run.state === "waiting") return null; // the question panel says it
    if (store.running) return html`<div class="live-pending" role="status"><span class="spinner" aria-hidden="true"></span> Working…</div>`;
    return null;
  }
  const message = liveMessage(live);
  return html`
    <article class="msg msg-assistant msg-streaming" data-entry-id=${live.entryId} aria-label="Assistant message (streaming)" aria-busy=${!live.ended}>
      <div class="msg-body">
        <${AssistantBlocks} message=${message} store=${store} streaming=${true} />
        ${!live.ended ? html`<span class="cursor" aria-hidden="true"></span>` : null}
      </div>
    </article>
  `;
}

export function Conversation({ store, actions }) {
  const scroller = useRef(null);
  const inner = useRef(null);
  const stick = useRef(true);
  useLayoutEffect(() => {
    const el = scroller.current;
    const follow = frameThrottle(() => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    });
    const observer = new ResizeObserver(follow);
    observer.observe(inner.current);
    const onScroll = () => {
      stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    };
    el.addEventListener("scroll", onScroll, { passive: true });
    return () => {
      observer.disconnect();
      el.removeEventListener("scroll", onScroll);
    };
  }, []);
  const painted = useRef(false);
  const onItems = (count) => {
    if (painted.current || !store.snapshot) return;
    painted.current = true;
    stick.current = true;
    requestAnimationFrame(() => {
      scroller.current.scrollTop = scroller.current.scrollHeight;
      performance.mark("neta:conversation-painted");
      document.documentElement.dataset.conversationReady = String(count);
    });
  };
  return html`
    <div class="conversation" ref=${scroller} role="log" aria-label="Conversation" aria-live="off">
      <div class="conversation-inner" ref=${inner}>
        <${StableList} store=${store} actions=${actions} onItems=${onItems} />
        <div class="live-slot"><${HeldBatches} store=${store} /><${LiveMessage} store=${store} /></div>
      </div>
    </div>
  `;
}
