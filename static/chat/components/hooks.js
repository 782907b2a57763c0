// Store subscriptions for components: re-render only when a part they read changed.
import { useEffect, useReducer, useRef } from "preact/hooks";

export function useStore(store, parts) {
  const [, force] = useReducer((n) => n + 1, 0);
  const wanted = useRef(parts);
  wanted.current = parts;
  const drawnAt = useRef(0);
  drawnAt.current = store.changeCount ?? 0; // what the store had told when this was drawn
  useEffect(() => {
    const off = store.subscribe((changes) => {
      for (const part of wanted.current) {
        if (changes.has(part)) {
          force();
          return;
        }
      }
    });
    // The store may have changed between this draw and this effect (a run's end arriving
    // in the same task as the answer it ends): draw again rather than miss it.
    if ((store.changeCount ?? 0) !== drawnAt.current) force();
    return off;
  }, [store]);
  return store;
}

/** Calls `fn` at most once per animation frame with the latest arguments. */
export function frameThrottle(fn) {
  let scheduled = false;
  let args = [];
  return (...latest) => {
    args = latest;
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      fn(...args);
    });
  };
}

/**
 * Whether moves in the tree wait now (a run is active, or the page is read-only), redrawn
 * only when that flips: every answer's buttons ask, and a streaming answer changes the
 * store many times a second.
 */
export function useBusy(store) {
  const busy = () => store.running || store.readOnly;
  const [value, set] = useReducer((_, next) => next, undefined, busy);
  useEffect(() => {
    const off = store.subscribe(() => set(busy()));
    set(busy());
    return off;
  }, [store]);
  return value;
}
