// "Show this entry in the conversation": the tree asks, the conversation answers.

const listeners = new Set();

/** Ask the conversation to scroll to `entryId`; true when some listener showed it. */
export function revealEntry(entryId) {
  let shown = false;
  for (const listener of listeners) shown = listener(entryId) || shown;
  return shown;
}

export function onReveal(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
