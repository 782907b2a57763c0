// Store subscriptions for components: re-render only when a part they read changed.
import { useEffect, useReducer, useRef } from "preact/hooks";

export function useStore(store, parts) {
  const [, force] = useReducer((n) => n + 1, 0);
  const wanted = useRef(parts);
  wanted.current = parts;
  useEffect(
    () =>
      store.subscribe((changes) => {
        for (const part of wanted.current) {
          if (changes.has(part)) {
            force();
            return;
          }
        }
      }),
    [store],
  );
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
