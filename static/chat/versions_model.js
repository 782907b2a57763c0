// Versions in the conversation (pure, node-tested): the `‹ 2/3 ›` switcher of a message
// with siblings, and where the leaf goes when another version is picked.
//
// A message's versions are its parent's children of the same kind (user messages for a
// user message, assistant messages for an answer): an edited prompt is a sibling user
// message, a regenerated answer a sibling answer. Picking one moves the leaf to the
// newest end of that version's subtree (the last child at every step), as the peers do.

import { ROOT_KEY } from "./tree_events.js";
import { entryKind } from "./tree_model.js";

const VERSIONED = new Set(["user", "assistant"]);

/** {ids, index} of the versions of `entryId` (index: its own position), or null with none. */
export function versionsOf(snapshot, lookup, entryId) {
  const entry = lookup(entryId);
  if (!entry || !snapshot) return null;
  const kind = entryKind(entry);
  if (!VERSIONED.has(kind)) return null;
  const inFlight = snapshot.inFlight?.id ?? null;
  const siblings = snapshot.childrenByParentId?.[entry.parentId ?? ROOT_KEY] ?? [];
  const ids = siblings.filter((id) => id !== inFlight && entryKind(lookup(id)) === kind);
  if (ids.length < 2) return null;
  const index = ids.indexOf(entryId);
  return index < 0 ? null : { ids, index };
}

/** The newest end of `entryId`'s subtree: the leaf to move to when that version is picked. */
export function versionLeaf(snapshot, entryId) {
  const inFlight = snapshot.inFlight?.id ?? null;
  let cursor = entryId;
  const seen = new Set([cursor]);
  for (;;) {
    const children = (snapshot.childrenByParentId?.[cursor] ?? []).filter((id) => id !== inFlight);
    const next = children[children.length - 1];
    if (next === undefined || seen.has(next)) return cursor;
    seen.add(next);
    cursor = next;
  }
}

/** The version `step` (-1, +1) away from `entryId`, and the leaf it leads to; null at an end. */
export function stepVersion(snapshot, lookup, entryId, step) {
  const versions = versionsOf(snapshot, lookup, entryId);
  if (!versions) return null;
  const target = versions.ids[versions.index + step];
  if (target === undefined) return null;
  return { entryId: target, leafId: versionLeaf(snapshot, target) };
}
