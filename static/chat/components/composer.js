// The composer: Enter sends, Shift+Enter is a newline; abort, follow-up/steer while a
// run is active; images by paste or upload; the branch banner for "continue from here".

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { useSlashMenu } from "./slash.js";

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const MAX_IMAGES = 8;
const MAX_IMAGE_BYTES = 7 * 1024 * 1024; // base64 grows by 4/3: the server takes 10 MB of it

function readImage(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const [, data] = String(reader.result).split(",", 2);
      resolve({ data, mimeType: file.type, name: file.name || "pasted image" });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

export function Composer({ store, draft, setDraft, banner, onCancelBanner, onSend, onAbort, supportsImages, enterSends = true, pickers = null, queued = null }) {
  useStore(store, ["run", "connection", "live"]);
  const running = store.running;
  const [mode, setMode] = useState("follow_up");
  const [images, setImages] = useState([]);
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  const area = useRef(null);
  const fileInput = useRef(null);
  const [dragging, setDragging] = useState(false);
  const slash = useSlashMenu(draft.text, (text) => setDraft({ text }));

  useEffect(() => {
    if (draft.focus) area.current?.focus();
  }, [draft.version]);
  useEffect(() => {
    // Ready to type on arrival (not on phones: the keyboard would cover the page).
    if (!window.matchMedia("(max-width: 900px)").matches) area.current?.focus({ preventScroll: true });
  }, []);

  const addFiles = async (files) => {
    setError(null);
    const wanted = [...files].filter((f) => IMAGE_TYPES.includes(f.type));
    if (wanted.length < files.length) setError("Only PNG, JPEG, GIF and WebP images can be attached.");
    const tooBig = wanted.find((f) => f.size > MAX_IMAGE_BYTES);
    if (tooBig) {
      setError(`${tooBig.name} is larger than 7 MB.`);
      return;
    }
    const read = await Promise.all(wanted.slice(0, MAX_IMAGES - images.length).map(readImage));
    setImages([...images, ...read]);
  };

  const send = async () => {
    const text = draft.text;
    if (!text.trim() || sending) return;
    setSending(true);
    setError(null);
    const sent = images;
    // Cleared at once, not when the server's ack arrives: what is typed while the ack is on
    // its way is the next message and must stay. A send that fails (or is given up) puts its
    // text back only into an empty composer.
    setDraft({ text: "" });
    setImages([]);
    const restore = () => {
      setDraft((d) => (d.text.trim() ? d : { text }));
      setImages((now) => (now.length ? now : sent));
    };
    try {
      if ((await onSend({ text, images: sent.map(({ data, mimeType }) => ({ data, mimeType })), mode })) === false) restore();
    } catch (e) {
      restore();
      setError(e.message || String(e));
    } finally {
      setSending(false);
    }
  };

  const onKeyDown = (event) => {
    if (slash.onKeyDown(event)) return;
    const sends = enterSends || event.ctrlKey || event.metaKey;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && sends) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape" && banner) {
      onCancelBanner();
    }
  };

  const onPaste = (event) => {
    const files = [...(event.clipboardData?.files ?? [])];
    if (files.length && supportsImages) {
      event.preventDefault();
      addFiles(files);
    }
  };

  const onDrag = (event) => {
    if (!supportsImages || ![...(event.dataTransfer?.types ?? [])].includes("Files")) return;
    event.preventDefault();
    setDragging(event.type !== "dragleave");
  };
  const onDrop = (event) => {
    setDragging(false);
    if (!supportsImages || !event.dataTransfer?.files?.length) return;
    event.preventDefault();
    addFiles(event.dataTransfer.files);
  };

  const offline = store.connection.state !== "live";
  return html`
    <form class=${`composer${dragging ? " dragging" : ""}`} onSubmit=${(e) => { e.preventDefault(); send(); }} aria-label="Message composer"
      onDragOver=${onDrag} onDragEnter=${onDrag} onDragLeave=${onDrag} onDrop=${onDrop}>
      ${queued}
      ${banner
        ? html`<div class="branch-banner" role="status">
            <span>⎇ Sending starts a new branch from <strong>${banner.fromLabel}</strong> (the edited message stays in its old branch).</span>
            <button type="button" class="link-button" onClick=${onCancelBanner}>Cancel</button>
          </div>`
        : null}
      ${images.length
        ? html`<ul class="attachments" aria-label="Attached images">
            ${images.map((img, i) => html`<li key=${i}><img alt=${img.name} src=${`data:${img.mimeType};base64,${img.data}`} /><button type="button" class="icon-button" aria-label=${`Remove ${img.name}`} onClick=${() => setImages(images.filter((_, j) => j !== i))}>✕</button></li>`)}
          </ul>`
        : null}
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      ${slash.menu}
      <div class="composer-row">
        <label for="composer-input" class="visually-hidden">Message</label>
        <textarea
          id="composer-input"
          ref=${area}
          rows="3"
          placeholder=${running ? `Queue a message for the running agent… (${enterSends ? "Enter" : "Ctrl+Enter or Queue"} sends)` : enterSends ? "Message the agent… (Enter sends, Shift+Enter for a new line, / for commands)" : "Message the agent… (Ctrl+Enter or Send sends, / for commands)"}
          aria-autocomplete="list"
          aria-controls=${slash.open ? "slash-menu" : undefined}
          aria-activedescendant=${slash.activeId}
          value=${draft.text}
          onInput=${(e) => {
            setDraft({ text: e.currentTarget.value });
            if (error) setError(null);
          }}
          onKeyDown=${onKeyDown}
          onPaste=${onPaste}
        ></textarea>
        <div class="composer-buttons">
          ${supportsImages
            ? html`<button type="button" class="icon-button" aria-label="Attach images" title="Attach images" onClick=${() => fileInput.current.click()}>Attach</button>
                <input ref=${fileInput} type="file" aria-label="Images to attach" accept=${IMAGE_TYPES.join(",")} multiple hidden onChange=${(e) => { addFiles(e.currentTarget.files); e.currentTarget.value = ""; }} />`
            : null}
          ${running
            ? html`<label class="visually-hidden" for="queue-mode">Deliver as</label>
                <select id="queue-mode" value=${mode} onChange=${(e) => setMode(e.currentTarget.value)} title="How a message sent during a run is delivered">
                  <option value="follow_up">Follow-up</option>
                  <option value="steer">Steer</option>
                </select>`
            : null}
          <button type="submit" class="primary" disabled=${!draft.text.trim() || sending || offline}>${running ? "Queue" : "Send"}</button>
          ${running ? html`<button type="button" class="danger" onClick=${onAbort}>Abort</button>` : null}
        </div>
      </div>
      ${pickers}
    </form>
  `;
}
