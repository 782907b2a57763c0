// Following the bottom of the conversation while an answer streams.
//
// The reader stays at the bottom until they scroll up themselves. "Scrolled up" is a
// move of the scroll position towards the top while the content did not shrink:
// the page's own scrolling only ever goes down, and a scroll event that arrives after
// more text was added (the content grew past the last position) is not the reader.

const AT_BOTTOM = 24;

export function followBottom(scroller, content, onFollowingChange) {
  let following = true;
  let lastTop = scroller.scrollTop;
  let lastHeight = scroller.scrollHeight;

  const set = (value) => {
    if (value === following) return;
    following = value;
    onFollowingChange(value);
  };
  const distance = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight;
  const toBottom = () => {
    scroller.scrollTop = scroller.scrollHeight;
    lastTop = scroller.scrollTop;
    lastHeight = scroller.scrollHeight;
  };
  // ResizeObserver callbacks run after layout and before paint: scrolling here leaves
  // no frame in which new text is below the fold.
  const onGrow = () => {
    if (following) toBottom();
    else if (distance() <= AT_BOTTOM) set(true);
  };
  const onScroll = () => {
    const top = scroller.scrollTop;
    const height = scroller.scrollHeight;
    if (distance() <= AT_BOTTOM) set(true);
    else if (top < lastTop - 1 && height >= lastHeight) set(false);
    lastTop = top;
    lastHeight = height;
  };
  const observer = new ResizeObserver(onGrow);
  observer.observe(content);
  scroller.addEventListener("scroll", onScroll, { passive: true });
  return {
    get following() {
      return following;
    },
    /** Back to the bottom, following again ("Jump to latest"). */
    jump() {
      set(true);
      toBottom();
    },
    /** Stop following (the page moved the reader elsewhere, e.g. to a tree node). */
    release() {
      set(false);
      lastTop = scroller.scrollTop;
      lastHeight = scroller.scrollHeight;
    },
    destroy() {
      observer.disconnect();
      scroller.removeEventListener("scroll", onScroll);
    },
  };
}
