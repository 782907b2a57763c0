// The conversation: the active path as a stable list, the streaming message in its
// own container below it (streaming never re-renders the list).

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { AssistantBlocks, EntryItem } from "./messages.js";
import { useStore } from "./hooks.js";
import { conversationItems, groupTurns } from "../conversation_model.js";
import { contentText } from "../tree_model.js";
import { liveMessage } from "../streaming.js";
import { HeldBatches, SubagentPanel } from "./subagent_panel.js";
import { followBottom } from "../follow.js";
import { onReveal } from "../reveal.js";
import { trackThinking } from "../thinking_time.js";
import { FirstScreen } from "./first_screen.js";
import { t } from "../i18n.js";

const NOTE_KINDS = new Set(["model_change", "thinking_level_change"]);

/** The index of the item that draws `entryId` (a tool result is drawn by its call's item). */
function itemIndexOf(items, entryId) {
  const key = `${entryId};`;
  return items.findIndex((item) => item.id === entryId || (item.resultsKey && item.resultsKey.includes(key)) || (item.ids && item.ids.includes(key)));
}

/** The model and thinking level a session starts with are its settings, not news: notes
 * show from the first message on (a change mid-talk). */
function withoutStartingNotes(items) {
  const first = items.findIndex((item) => !NOTE_KINDS.has(item.kind));
  return first > 0 ? items.slice(first) : first < 0 ? [] : items;
}

/** The labels an item shows: its own, or for an answer every label of its model calls. */
function itemLabel(item, labels) {
  if (item.kind !== "turn") return labels[item.id] ?? null;
  const all = item.members.map((m) => labels[m.id]).filter((l) => typeof l === "string" && l);
  return all.length ? all.join(", ") : null;
}

const PAGE = 60;

/** A node outside the item flash (the live slot's batch, a child's row): the same mark. */
function flashNode(node) {
  node.classList.add("revealed");
  setTimeout(() => node.classList.remove("revealed"), 1600);
}

function StableList({ store, actions, onItems, agent, onStarter, follower }) {
  useStore(store, ["leaf", "tree"]);
  const snapshot = store.snapshot ? store.treeSnapshot() : null; // with any older entries paged in
  const [limit, setLimit] = useState(PAGE);
  const items = useMemo(
    () => (snapshot ? groupTurns(withoutStartingNotes(conversationItems(snapshot, (id) => store.entry(id)))) : []),
    [snapshot?.activePath, snapshot?.entries, snapshot?.inFlight],
  );
  useEffect(() => onItems(items.length), [items]);
  const listRef = useRef(null);
  const anchor = useRef(null);
  const [flash, setFlash] = useState(null);
  // "Show earlier" keeps the reader's place: what was on screen stays where it was.
  const showEarlier = (more) => {
    const el = listRef.current?.closest(".conversation");
    if (el) anchor.current = { height: el.scrollHeight, top: el.scrollTop };
    follower.current?.release();
    setLimit(limit + more);
  };
  useLayoutEffect(() => {
    const el = listRef.current?.closest(".conversation");
    if (!el || !anchor.current) return;
    el.scrollTop = anchor.current.top + (el.scrollHeight - anchor.current.height);
    anchor.current = null;
  }, [limit]);
  // The tree asks to show an entry: draw enough items to include it, then scroll to it.
  const pending = useRef(null);
  useEffect(
    () =>
      onReveal((entryId) => {
        // The batch in flight is drawn below the list (the live slot), not as an item.
        if (entryId === store.snapshot?.inFlight?.id) {
          const node = listRef.current?.parentElement?.querySelector(`.live-slot [data-entry-id="${CSS.escape(entryId)}"]`);
          if (!node) return false;
          follower.current?.release();
          node.scrollIntoView({ block: "center" });
          flashNode(node);
          return true;
        }
        let id = entryId;
        let index = itemIndexOf(items, id);
        for (let hops = 0; index < 0 && hops < 50; hops++) {
          id = store.entry(id)?.parentId; // labels, names: shown by the item before them
          if (typeof id !== "string" || !snapshot?.activePath.includes(id)) return false;
          index = itemIndexOf(items, id);
        }
        if (index < 0) return false;
        pending.current = items[index].id;
        revealRow.current = id; // a subagent result: its child's row in the batch's panel
        const need = items.length - index;
        if (need > limit) setLimit(need + 10);
        else scrollToPending();
        return true;
      }),
    [items, limit],
  );
  const revealRow = useRef(null);
  const scrollToPending = () => {
    const id = pending.current;
    const node = id && listRef.current?.querySelector(`[data-entry-id="${CSS.escape(id)}"]`);
    if (!node) return;
    pending.current = null;
    follower.current?.release();
    // The entry's own part of the item, when it has one: a subagent result's child row, a
    // batch's panel inside its answer's card.
    const wanted = revealRow.current;
    revealRow.current = null;
    const row = wanted
      ? node.querySelector(`[data-result-entry-id="${CSS.escape(wanted)}"]`) ?? (wanted !== id ? node.querySelector(`[data-entry-id="${CSS.escape(wanted)}"]`) : null)
      : null;
    (row ?? node).scrollIntoView({ block: "center" });
    if (row) {
      flashNode(row);
      const batch = row.closest(".msg-subagents"); // a child's row: its batch's panel too
      if (batch && batch !== row) flashNode(batch);
    } else setFlash(id);
  };
  useLayoutEffect(() => {
    if (pending.current) scrollToPending();
  }, [limit]);
  useEffect(() => {
    if (!flash) return undefined;
    const node = listRef.current?.querySelector(`[data-entry-id="${CSS.escape(flash)}"]`);
    node?.classList.add("revealed");
    const timer = setTimeout(() => {
      node?.classList.remove("revealed");
      setFlash(null);
    }, 1600);
    return () => clearTimeout(timer);
  }, [flash]);
  if (!snapshot) return html`<p class="empty-state" role="status">${t("Connecting…")}</p>`;
  const hidden = Math.max(0, items.length - limit);
  const truncated = snapshot.page?.activePathTruncated;
  const labels = snapshot.labelsByEntryId;
  return html`
    <div class="stable-list" ref=${listRef}>
      ${hidden > 0 || truncated
        ? html`<div class="earlier">
            ${hidden > 0 ? html`<button type="button" class="link-button" onClick=${() => showEarlier(PAGE * 2)}>${t("Show {count} earlier of {hidden} hidden", { count: Math.min(hidden, PAGE * 2), hidden })}</button>` : null}
            ${truncated && hidden === 0
              ? html`<span class="muted">${t("Older entries of this path are not loaded ({n} in all).", { n: snapshot.page.activePathLength })}</span>
                  ${store.older.below > 0
                    ? html`<button type="button" class="link-button" disabled=${store.older.loading} onClick=${() => actions.loadOlder()}>${store.older.loading ? t("Loading…") : t("Load older messages")}</button>`
                    : null}`
              : null}
          </div>`
        : null}
      ${items.slice(hidden).map((item) => html`<${EntryItem} key=${item.id} item=${item} label=${itemLabel(item, labels)} actions=${actions} store=${store} />`)}
      ${items.every((item) => NOTE_KINDS.has(item.kind)) && !snapshot.inFlight && !truncated && agent
        ? html`<${FirstScreen} agent=${agent} onStarter=${onStarter} />`
        : null}
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
    if (store.running) return html`<div class="live-pending" role="status"><span class="spinner" aria-hidden="true"></span> ${t("Working…")}</div>`;
    return null;
  }
  const message = liveMessage(live);
  trackThinking(live.entryId, message, live.ended);
  // A later model call of the answer drawn above (after its tool calls): the same card goes on.
  const parent = store.entry(store.snapshot?.inFlight?.parentId);
  const role = parent?.type === "message" ? parent.message?.role : parent?.type;
  const continues = role === "assistant" || role === "toolResult" || role === "subagent_batch" || role === "subagent_result";
  return html`
    <article class=${`msg msg-assistant msg-streaming${continues ? " msg-continues" : ""}`} data-entry-id=${live.entryId} aria-label=${t("Assistant answer (streaming)")} aria-busy=${!live.ended}>
      <div class="msg-body">
        <${AssistantBlocks} message=${message} store=${store} streaming=${true} entryId=${live.entryId} />
        ${!live.ended ? html`<span class="cursor" aria-hidden="true"></span>` : null}
      </div>
    </article>
  `;
}

export const FOLLOW_EVENT = "neta:follow";

/** Ask the conversation to follow its bottom again (the page sent something). */
export function followLatest() {
  window.dispatchEvent(new Event(FOLLOW_EVENT));
}

/**
 * Screen readers hear an answer once, when it is complete (the log itself is not live: a
 * stream read aloud delta by delta is noise): a polite status region gets the answer's
 * text (its first 600 characters), or how the run ended.
 */
function AnswerAnnouncer({ store }) {
  useStore(store, ["run"]);
  const [said, setSaid] = useState("");
  const last = useRef({ runId: null, state: null });
  useEffect(() => {
    const { runId, state } = store.run;
    const before = last.current;
    last.current = { runId, state };
    if (!runId || (before.runId === runId && before.state === state)) return;
    if (!["completed", "failed", "aborted"].includes(state) || before.runId !== runId || !["running", "queued", "waiting"].includes(before.state)) return;
    const path = store.snapshot?.activePath ?? [];
    let text = "";
    for (let i = path.length - 1; i >= 0; i--) {
      const entry = store.entry(path[i]);
      if (entry?.type === "message" && entry.message?.role === "assistant") {
        text = contentText(entry.message.content);
        if (text) break;
      }
      if (entry?.type === "message" && entry.message?.role === "user") break;
    }
    const head = state === "completed" ? t("Answer") : state === "failed" ? t("The answer failed") : t("The answer was aborted");
    setSaid(`${head}${text ? `: ${text.length > 600 ? `${text.slice(0, 600)}…` : text}` : "."}`);
  }, [store.run.runId, store.run.state]);
  return html`<div class="visually-hidden" role="status" aria-live="polite" aria-atomic="true" data-announcer>${said}</div>`;
}

export function Conversation({ store, actions, agent = null, onStarter = () => {} }) {
  const scroller = useRef(null);
  const inner = useRef(null);
  const follower = useRef(null);
  const [following, setFollowing] = useState(true);
  useLayoutEffect(() => {
    follower.current = followBottom(scroller.current, inner.current, setFollowing);
    // Sending (a prompt, an edit, a regenerate) shows what comes: back to the bottom, following.
    const jump = () => follower.current?.jump();
    window.addEventListener(FOLLOW_EVENT, jump);
    return () => {
      window.removeEventListener(FOLLOW_EVENT, jump);
      follower.current.destroy();
    };
  }, []);
  const painted = useRef(false);
  const onItems = (count) => {
    if (painted.current || !store.snapshot) return;
    painted.current = true;
    requestAnimationFrame(() => {
      scroller.current.scrollTop = scroller.current.scrollHeight;
      performance.mark("neta:conversation-painted");
      document.documentElement.dataset.conversationReady = String(count);
    });
  };
  // The wrapper is the conversation's own box: "Jump to latest" sits at its bottom, above
  // whatever is below it (status bar, plan, composer), whatever their height.
  return html`
    <div class="conversation-frame">
      <${AnswerAnnouncer} store=${store} />
      <div class="conversation" ref=${scroller} role="log" aria-label=${t("Conversation")} aria-live="off">
        <div class="conversation-inner" ref=${inner}>
          <${StableList} store=${store} actions=${actions} onItems=${onItems} agent=${agent} onStarter=${onStarter} follower=${follower} />
          <div class="live-slot"><${HeldBatches} store=${store} /><${LiveMessage} store=${store} /></div>
        </div>
      </div>
      ${following ? null : html`<button type="button" class="jump-latest" onClick=${() => follower.current?.jump()}>↓ ${t("Jump to latest")}</button>`}
    </div>
  `;
}
