// The tree sidebar: every entry as a node in a virtual list (10k entries stay smooth).

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { frameThrottle, useStore } from "./hooks.js";
import { InlineEditor } from "./inline_editor.js";
import { buildRows, FILTERS, kindIcon, rowGuides, rowText } from "../tree_model.js";
import { SubagentRowStatus } from "./subagent_panel.js";
import { revealEntry } from "../reveal.js";
import { t, tn } from "../i18n.js";

const ROW = 28;
const OVERSCAN = 12;

function Guides({ row }) {
  const cells = rowGuides(row);
  if (cells.length === 0) return null;
  return html`<span class="tree-guides" aria-hidden="true">${cells.map((c, i) => html`<span key=${i} class=${`guide guide-${c === " " ? "none" : c === "│" ? "line" : c === "├" ? "mid" : "last"}`}></span>`)}</span>`;
}

function FoldRow({ row, top, selected, onExpand }) {
  return html`
    <div id=${`tree-row-${row.id}`} class=${`tree-row kind-fold${selected ? " selected" : ""}`} role="treeitem" aria-level=${row.depth + 1} aria-selected=${selected} aria-expanded="false"
      aria-label=${tn("{n} more entry, folded", "{n} more entries, folded", row.count)} data-fold-of=${row.foldOf} style=${`top:${top}px;padding-left:8px`} onClick=${() => onExpand(row.foldOf)}>
      <${Guides} row=${row} /><span class="twisty-space"></span><span class="fold-text">${rowText(row)}</span><span class="muted fold-hint">${t("show")}</span>
    </div>
  `;
}

function TreeRow({ row, top, selected, onSelect, onGo, onToggle, onExpand }) {
  if (row.kind === "fold") return html`<${FoldRow} row=${row} top=${top} selected=${selected} onExpand=${onExpand} />`;
  const indent = 8;
  const classes = ["tree-row", `kind-${row.kind}`];
  if (row.onPath) classes.push("on-path");
  if (row.isLeaf) classes.push("is-leaf");
  if (selected) classes.push("selected");
  if (row.inFlight) classes.push("in-flight");
  if (row.connector) classes.push("starts-sibling");
  return html`
    <div
      id=${`tree-row-${row.id}`}
      class=${classes.join(" ")}
      role="treeitem"
      aria-level=${row.depth + 1}
      aria-selected=${selected}
      aria-expanded=${row.hasChildren && row.branchPoint ? !row.collapsed : undefined}
      aria-current=${row.isLeaf ? "true" : undefined}
      data-entry-id=${row.id}
      style=${`top:${top}px;padding-left:${indent}px`}
      onClick=${() => onSelect(row.id)}
      onDblClick=${() => onGo(row.id)}
    >
      <${Guides} row=${row} />
      ${row.branchPoint
        ? html`<button type="button" class="twisty" tabindex="-1" aria-label=${row.collapsed ? t("expand") : t("collapse")} onClick=${(e) => { e.stopPropagation(); onToggle(row.id); }}>${row.collapsed ? "▸" : "▾"}</button>`
        : html`<span class="twisty-space"></span>`}
      <span class="kind-icon" aria-hidden="true">${kindIcon(row.kind)}</span>
      <span class="row-text">${rowText(row)}</span>
      <${SubagentRowStatus} entry=${row.entry} inFlight=${row.inFlight} />
      ${row.branchPoint ? html`<span class="branch-badge" title=${tn("{n} branch", "{n} branches", row.branchPoint)}>⎇ ${row.branchPoint}</span>` : null}
      ${row.label ? html`<span class="row-label">${row.label}</span>` : null}
      ${row.isLeaf ? html`<span class="leaf-marker" title=${t("the leaf: the next prompt continues here")}>● ${t("leaf")}</span>` : null}
    </div>
  `;
}

/**
 * `readOnly` (the console's session page): the same tree, with no leaf moves, labels or
 * forks — selecting and folding only.
 */
export function TreeSidebar({ store, actions, open, onClose, readOnly = false, drawer = false }) {
  useStore(store, ["tree", "leaf"]);
  // The conversation paints first; the tree is built in the task after that paint.
  const [ready, setReady] = useState(false);
  useEffect(() => {
    if (ready || !store.snapshot) return undefined;
    const timer = setTimeout(() => requestAnimationFrame(() => setTimeout(() => setReady(true))), 0);
    return () => clearTimeout(timer);
  }, [ready, store.snapshot !== null]);
  const snapshot = ready ? store.treeSnapshot() : null; // with any older entries paged in
  const older = store.older;
  const [filter, setFilter] = useState("all");
  const [notes, setNotes] = useState(false); // bookkeeping rows (titles, labels, model changes) shown
  const [collapsed, setCollapsed] = useState(() => new Set());
  const [expanded, setExpanded] = useState(() => new Set());
  const [selected, setSelected] = useState(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const [editing, setEditing] = useState(null);
  const viewport = useRef(null);
  const list = useRef(null);

  const model = useMemo(
    () => (snapshot ? buildRows({ snapshot, lookup: (id) => store.entry(id), filter, collapsed, expanded, notes }) : { rows: [], indexById: new Map(), total: 0, shown: 0, leafId: null }),
    [snapshot?.entries, snapshot?.activePath, snapshot?.labelsByEntryId, snapshot?.inFlight, filter, collapsed, expanded, notes],
  );
  const { rows, indexById } = model;
  const selectedId = selected !== null && indexById.has(selected) ? selected : model.leafId ?? null;
  const selectedIndex = selectedId !== null ? indexById.get(selectedId) ?? -1 : -1;

  useLayoutEffect(() => {
    const el = viewport.current;
    if (!el) return undefined;
    const onScroll = frameThrottle(() => setScrollTop(el.scrollTop));
    const observer = new ResizeObserver(() => setHeight(el.clientHeight || 600));
    observer.observe(el);
    el.addEventListener("scroll", onScroll, { passive: true });
    return () => {
      observer.disconnect();
      el.removeEventListener("scroll", onScroll);
    };
  }, []);

  const reveal = (index) => {
    const el = viewport.current;
    if (!el || index < 0) return;
    const top = index * ROW;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + ROW > el.scrollTop + el.clientHeight) el.scrollTop = top + ROW - el.clientHeight;
    setScrollTop(el.scrollTop);
  };

  // Show the leaf when the tree first appears and whenever the leaf moves.
  const announced = useRef(false);
  useEffect(() => {
    if (!snapshot) return;
    const index = indexById.get(model.leafId);
    if (index !== undefined) reveal(index);
    if (!announced.current) {
      announced.current = true;
      requestAnimationFrame(() => {
        performance.mark("neta:tree-interactive");
        document.documentElement.dataset.treeReady = String(rows.length);
      });
    }
  }, [snapshot?.leafId, snapshot !== null]);

  const showInConversation = useMemo(() => frameThrottle((id) => revealEntry(id)), []);
  const go = readOnly ? () => {} : (id) => (actions.treeGo ?? actions.goTo)(id);
  const select = (id) => {
    setSelected(id);
    setEditing(null);
    // Selecting a node scrolls the conversation to it (when on the active path). As a drawer
    // (a phone) the tree then gets out of the way, so the entry is seen; a node off the path
    // stays selected in the open drawer, with its actions (Go here, Label, Fork).
    if (drawer) {
      if (revealEntry(id)) onClose();
    } else showInConversation(id);
  };
  const expand = (id) => {
    const next = new Set(expanded);
    next.add(id);
    setExpanded(next);
    setSelected(id);
  };
  const toggle = (id) => {
    const next = new Set(collapsed);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setCollapsed(next);
  };

  const onKey = (event) => {
    if (editing !== null || rows.length === 0) return;
    const index = Math.max(0, selectedIndex);
    const page = Math.max(1, Math.floor((viewport.current?.clientHeight ?? 600) / ROW) - 1);
    const moves = { ArrowDown: index + 1, ArrowUp: index - 1, PageDown: index + page, PageUp: index - page, Home: 0, End: rows.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      const next = Math.max(0, Math.min(rows.length - 1, moves[event.key]));
      setSelected(rows[next].id);
      if (rows[next].kind !== "fold") showInConversation(rows[next].id);
      reveal(next);
      return;
    }
    const row = rows[index];
    if (!row) return;
    if (row.kind === "fold") {
      if (event.key === "Enter" || event.key === "ArrowRight") {
        event.preventDefault();
        expand(row.foldOf);
      }
      return;
    }
    if (readOnly && ["Enter", "l", "L", "f", "F"].includes(event.key)) return;
    if (event.key === "Enter") {
      event.preventDefault();
      go(row.id);
    } else if (event.key === "ArrowLeft" && row.branchPoint && !row.collapsed) {
      event.preventDefault();
      toggle(row.id);
    } else if (event.key === "ArrowRight" && row.collapsed) {
      event.preventDefault();
      toggle(row.id);
    } else if (event.key === "l" || event.key === "L") {
      event.preventDefault();
      setEditing(row.id);
    } else if (event.key === "f" || event.key === "F") {
      event.preventDefault();
      actions.fork(row.id);
    }
  };

  const start = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN);
  const end = Math.min(rows.length, Math.ceil((scrollTop + height) / ROW) + OVERSCAN);
  const visible = rows.slice(start, end);
  const picked = selectedIndex >= 0 ? rows[selectedIndex] : null;
  const selectedRow = picked?.kind === "fold" ? null : picked;

  return html`
    <aside class=${`tree-sidebar${open ? " open" : ""}`} aria-label=${t("Session tree")}>
      <div class="tree-header">
        <h2>${t("Tree")}</h2>
        <span class="muted tree-count">${model.shown !== model.total ? t("{shown} of {total} entries", { shown: model.shown, total: model.total }) : tn("{n} entry", "{n} entries", model.shown)}${snapshot?.page?.truncated ? ` ${t("({n} stored)", { n: snapshot.page.totalEntries })}` : ""}</span>
        <button type="button" class="icon-button drawer-close" onClick=${onClose} aria-label=${t("Close the tree")}>✕</button>
      </div>
      ${snapshot && older.below > 0
        ? html`<div class="tree-older">
            <button type="button" class="small" disabled=${older.loading} onClick=${() => actions.loadOlder()}>${older.loading ? t("Loading…") : t("Load older entries")}</button>
            <span class="muted">${t("{n} older not shown", { n: snapshot.page.totalEntries - snapshot.entries.length })}</span>
          </div>`
        : null}
      <div class="tree-filters">
        <span class="tree-filter-group" role="radiogroup" aria-label=${t("Show")}>${FILTERS.map((f) => html`<button type="button" role="radio" aria-checked=${filter === f.id} class=${filter === f.id ? "chip active" : "chip"} onClick=${() => setFilter(f.id)}>${f.label}</button>`)}</span>
        <button type="button" class=${notes ? "chip active notes-toggle" : "chip notes-toggle"} aria-pressed=${notes} onClick=${() => setNotes(!notes)}
          title=${t("Titles, labels, model and thinking-level changes, feedback: folded into the entry before them unless shown")}>${t("Notes")}</button>
      </div>
      <div
        class="tree-viewport"
        ref=${viewport}
        role="tree"
        tabindex="0"
        aria-label=${t("Entries of this session")}
        aria-activedescendant=${picked ? `tree-row-${picked.id}` : undefined}
        onKeyDown=${onKey}
      >
        <div class="tree-spacer" ref=${list} style=${`height:${rows.length * ROW}px`}>
          ${visible.map((row, i) => html`<${TreeRow} key=${row.id} row=${row} top=${(start + i) * ROW} selected=${row.id === selectedId} onSelect=${select} onGo=${go} onToggle=${toggle} onExpand=${expand} />`)}
        </div>
      </div>
      ${selectedRow
        ? html`<div class="tree-actions" aria-label=${t("Selected entry")}>
            ${readOnly
              ? html`<span class="selected-text" title=${rowText(selectedRow)}>${kindIcon(selectedRow.kind)} ${rowText(selectedRow)}</span>`
              : editing === selectedRow.id
              ? html`<${InlineEditor} id="label-input" label=${t("Label")} className="label-editor" maxLength="200" placeholder=${t("Label (empty clears it)")} initial=${selectedRow.label ?? ""} onDone=${async (value) => {
                  setEditing(null);
                  if (value !== null) await actions.label(selectedRow.id, value);
                  viewport.current?.focus();
                }} />`
              : html`
                  <span class="selected-text" title=${rowText(selectedRow)}>${kindIcon(selectedRow.kind)} ${rowText(selectedRow)}</span>
                  <div class="button-row">
                    <button type="button" class="primary small" disabled=${selectedRow.isLeaf} onClick=${async () => { await go(selectedRow.id); if (drawer) onClose(); }} title="Enter">${t("Go here")}</button>
                    <button type="button" class="small" onClick=${() => setEditing(selectedRow.id)} title="L">${t("Label")}</button>
                    <button type="button" class="small" onClick=${() => actions.fork(selectedRow.id)} title=${t("F: a new session holding the path up to here")}>${t("Fork")}</button>
                  </div>
                `}
          </div>`
        : null}
    </aside>
  `;
}
