// The composer: Enter sends, Shift+Enter is a newline; abort, follow-up/steer while a
// run is active; images by paste or upload; the branch banner for "continue from here".

import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { useSlashMenu } from "./slash.js";
import { PendingDocuments } from "./documents.js";
import { DOCUMENT_MAX_BYTES, DOCUMENTS_MAX, formatBytes, isDocumentFile } from "../documents.js";
import { t } from "../i18n.js";

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const MAX_IMAGES = 8;
const MAX_IMAGE_BYTES = 7 * 1024 * 1024; // base64 grows by 4/3: the server takes 10 MB of it
const ATTACH_TYPES = "application/pdf,text/*,.md,.markdown,.txt,.csv,.json,.yaml,.yml,.toml,.xml,.html,.css,.js,.mjs,.ts,.tsx,.jsx,.py,.rb,.go,.rs,.java,.kt,.c,.h,.cpp,.hpp,.cs,.php,.sh,.sql,.swift,.lua,.r,.tex,.diff,.patch,.log,.ini,.cfg";
const NARROW = () => typeof matchMedia === "function" && matchMedia("(max-width: 900px)").matches;

/** A phone's composer starts one line high and grows with its text (to a third of the screen). */
function grow(area) {
  area.style.height = "auto";
  area.style.height = `${Math.min(area.scrollHeight + 2, Math.round(window.innerHeight / 3))}px`;
}

function readImage(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const [, data] = String(reader.result).split(",", 2);
      resolve({ data, mimeType: file.type, name: file.name || "pasted image", size: file.size });
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
  const [documents, setDocuments] = useState([]); // {data, mimeType, name, size}: their text is read by the server
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(0); // sends under way
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

  // Images (when the model takes them) and documents (PDF, text, markdown, code) by paste,
  // drop or Attach. A file refused says why; nothing already attached or typed is lost.
  const addFiles = async (files) => {
    setError(null);
    const list = [...files];
    const problems = [];
    const imageFiles = [];
    const documentFiles = [];
    for (const file of list) {
      const name = file.name || "pasted file";
      if (IMAGE_TYPES.includes(file.type) && supportsImages) {
        if (file.size > MAX_IMAGE_BYTES) problems.push(t("{name} is {size}: images up to 7 MB can be attached.", { name, size: formatBytes(file.size) }));
        else imageFiles.push(file);
      } else if (isDocumentFile(file)) {
        if (file.size > DOCUMENT_MAX_BYTES) problems.push(t("{name} is {size}: documents up to {max} can be attached.", { name, size: formatBytes(file.size), max: formatBytes(DOCUMENT_MAX_BYTES) }));
        else documentFiles.push(file);
      } else if (IMAGE_TYPES.includes(file.type)) {
        problems.push(`${name}: this model does not take images.`);
      } else {
        problems.push(supportsImages ? t("{name}: only PDF, text, markdown and code files and images (PNG, JPEG, GIF, WebP) can be attached.", { name }) : t("{name}: only PDF, text, markdown and code files can be attached.", { name }));
      }
    }
    const roomImages = Math.max(0, MAX_IMAGES - images.length);
    const roomDocs = Math.max(0, DOCUMENTS_MAX - documents.length);
    if (imageFiles.length > roomImages) problems.push(t("At most {n} images a message.", { n: MAX_IMAGES }));
    if (documentFiles.length > roomDocs) problems.push(t("At most {n} documents a message.", { n: DOCUMENTS_MAX }));
    if (problems.length) setError(problems.join(" "));
    try {
      const [readImages, readDocs] = await Promise.all([
        Promise.all(imageFiles.slice(0, roomImages).map(readImage)),
        Promise.all(documentFiles.slice(0, roomDocs).map(readImage)),
      ]);
      if (readImages.length) setImages((now) => [...now, ...readImages]);
      if (readDocs.length) setDocuments((now) => [...now, ...readDocs.map((d) => ({ ...d, mimeType: d.mimeType || "text/plain" }))]);
    } catch (e) {
      setError(`A file could not be read: ${e?.message ?? e}`);
    }
  };

  // Sends go out one after another, in the order they were made: a message sent while the
  // previous send (a slow /compact, say) is still out waits for it, rather than being dropped.
  const chain = useRef(Promise.resolve());
  const latestSend = useRef(onSend);
  latestSend.current = onSend;
  const send = () => {
    const text = draft.text;
    if (!text.trim()) return;
    setError(null);
    const sent = images;
    const sentDocs = documents;
    // Cleared at once, not when the server's ack arrives: what is typed while the ack is on
    // its way is the next message and must stay. A send that fails (or is given up) puts its
    // text and files back only into an empty composer.
    setDraft({ text: "" });
    setImages([]);
    setDocuments([]);
    const restore = () => {
      setDraft((d) => (d.text.trim() ? d : { text }));
      setImages((now) => (now.length ? now : sent));
      setDocuments((now) => (now.length ? now : sentDocs));
    };
    const payload = { text, images: sent.map(({ data, mimeType }) => ({ data, mimeType })), documents: sentDocs.map(({ data, mimeType, name }) => ({ data, mimeType, name })), mode };
    const deliver = async () => {
      setSending((n) => n + 1);
      try {
        // The handler of now, not of the moment it was queued: a send before it may have
        // changed where the next message goes (a branch started, a banner dropped).
        if ((await latestSend.current(payload)) === false) restore();
      } catch (e) {
        restore();
        setError(e.message || String(e));
      } finally {
        setSending((n) => n - 1);
      }
    };
    chain.current = chain.current.then(deliver);
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
    if (files.length) {
      event.preventDefault();
      addFiles(files);
    }
  };

  const onDrag = (event) => {
    if (![...(event.dataTransfer?.types ?? [])].includes("Files")) return;
    event.preventDefault();
    setDragging(event.type !== "dragleave");
  };
  const onDrop = (event) => {
    setDragging(false);
    if (!event.dataTransfer?.files?.length) return;
    event.preventDefault();
    addFiles(event.dataTransfer.files);
  };

  const offline = store.connection.state !== "live";
  const narrow = NARROW();
  // How a message sent during a run is delivered: beside Queue on a desktop; on a phone in the
  // pickers' row below, so the message box keeps its width beside Queue and Abort.
  const deliverAs = running
    ? html`<label class="visually-hidden" for="queue-mode">${t("Deliver as")}</label>
        <select id="queue-mode" value=${mode} onChange=${(e) => setMode(e.currentTarget.value)} title=${t("How a message sent during a run is delivered")}>
          <option value="follow_up">${t("Follow-up")}</option>
          <option value="steer">${t("Steer")}</option>
        </select>`
    : null;
  return html`
    <form class=${`composer${dragging ? " dragging" : ""}`} onSubmit=${(e) => { e.preventDefault(); send(); }} aria-label=${t("Message composer")}
      onDragOver=${onDrag} onDragEnter=${onDrag} onDragLeave=${onDrag} onDrop=${onDrop}>
      ${queued}
      ${banner
        ? html`<div class="branch-banner" role="status">
            <span>⎇ ${t("Sending starts a new branch from")} <strong>${banner.fromLabel}</strong> ${t("(the edited message stays in its old branch).")}</span>
            <button type="button" class="link-button" onClick=${onCancelBanner}>${t("Cancel")}</button>
          </div>`
        : null}
      ${images.length
        ? html`<ul class="attachments" aria-label=${t("Attached images")}>
            ${images.map((img, i) => html`<li key=${i}><img alt=${img.name} src=${`data:${img.mimeType};base64,${img.data}`} /><button type="button" class="icon-button" aria-label=${t("Remove {name}", { name: img.name })} onClick=${() => setImages(images.filter((_, j) => j !== i))}>✕</button></li>`)}
          </ul>`
        : null}
      <${PendingDocuments} documents=${documents} onRemove=${(i) => setDocuments(documents.filter((_, j) => j !== i))} />
      ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      ${slash.menu}
      <div class="composer-row">
        <label for="composer-input" class="visually-hidden">${t("Message")}</label>
        <textarea
          id="composer-input"
          ref=${area}
          rows=${narrow ? 1 : 3}
          placeholder=${narrow ? (running ? t("Queue a message…") : t("Message the agent…")) : running ? (enterSends ? t("Queue a message for the running agent… (Enter sends)") : t("Queue a message for the running agent… (Ctrl+Enter or Queue sends)")) : enterSends ? t("Message the agent… (Enter sends, Shift+Enter for a new line, / for commands)") : t("Message the agent… (Ctrl+Enter or Send sends, / for commands)")}
          aria-autocomplete="list"
          aria-controls=${slash.open ? "slash-menu" : undefined}
          aria-activedescendant=${slash.activeId}
          value=${draft.text}
          onInput=${(e) => {
            setDraft({ text: e.currentTarget.value });
            if (narrow) grow(e.currentTarget);
            if (error) setError(null);
          }}
          onKeyDown=${onKeyDown}
          onPaste=${onPaste}
        ></textarea>
        <div class="composer-buttons">
          <button type="button" class="icon-button attach-button" aria-label=${t("Attach files")} title=${supportsImages ? t("Attach documents (PDF, text, markdown, code) or images") : t("Attach documents (PDF, text, markdown, code)")} onClick=${() => fileInput.current.click()}>${narrow ? "+" : t("Attach")}</button>
          <input ref=${fileInput} type="file" aria-label=${t("Files to attach")} accept=${[...(supportsImages ? IMAGE_TYPES : []), ATTACH_TYPES].join(",")} multiple hidden onChange=${(e) => { addFiles(e.currentTarget.files); e.currentTarget.value = ""; }} />
          ${narrow ? null : deliverAs}
          <button type="submit" class="primary" disabled=${!draft.text.trim() || offline} aria-busy=${sending ? "true" : undefined}>${running ? t("Queue") : t("Send")}</button>
          ${running ? html`<button type="button" class="danger" onClick=${onAbort}>${t("Abort")}</button>` : null}
        </div>
      </div>
      ${narrow && deliverAs ? html`<div class="composer-under">${deliverAs}${pickers}</div>` : pickers}
    </form>
  `;
}
