// File chips: the documents of a user message (documents.js), and those the composer holds.

import { useState } from "preact/hooks";
import { html } from "./html.js";
import { formatBytes } from "../documents.js";
import { t, tn } from "../i18n.js";

function icon(type, name) {
  if (type === "application/pdf" || /\.pdf$/i.test(name)) return "PDF";
  if (/markdown/.test(type) || /\.md$/i.test(name)) return "MD";
  if (type.startsWith("text/plain")) return "TXT";
  return "</>";
}

/** A message's documents as chips; a chip opens the text the model read. */
export function DocumentChips({ documents }) {
  const [open, setOpen] = useState(null);
  if (!documents?.length) return null;
  return html`
    <ul class="file-chips" aria-label=${t("Attached documents")}>
      ${documents.map((doc, i) => html`<li key=${i}>
        <button type="button" class="file-chip" aria-expanded=${open === i} onClick=${() => setOpen(open === i ? null : i)} title=${t("Show the text the model read")}>
          <span class="file-icon" aria-hidden="true">${icon(doc.type, doc.name)}</span>
          <span class="file-name">${doc.name}</span>
          <span class="file-size">${doc.pages ? `${tn("{n} page", "{n} pages", doc.pages)} · ` : ""}${tn("{n} character", "{n} characters", doc.chars)}</span>
        </button>
      </li>`)}
    </ul>
    ${open !== null && documents[open] ? html`<pre class="document-text" aria-label=${t("Text of {name}", { name: documents[open].name })}>${documents[open].text}</pre>` : null}
  `;
}

/** The composer's documents before sending: name, size, remove. */
export function PendingDocuments({ documents, onRemove }) {
  if (!documents.length) return null;
  return html`
    <ul class="file-chips pending" aria-label=${t("Documents to send")}>
      ${documents.map((doc, i) => html`<li key=${i} class="file-chip">
        <span class="file-icon" aria-hidden="true">${icon(doc.mimeType, doc.name)}</span>
        <span class="file-name">${doc.name}</span>
        <span class="file-size">${formatBytes(doc.size)}</span>
        <button type="button" class="icon-button" aria-label=${t("Remove {name}", { name: doc.name })} onClick=${() => onRemove(i)}>✕</button>
      </li>`)}
    </ul>
  `;
}
