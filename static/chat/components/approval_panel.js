// The approval panel: while the run waits for a person to allow a tool call, the exact call
// sits at the composer (bash: the command; edit: the replacements; other tools: the
// arguments) with Allow once, Allow for this session (the tool, or for bash the commands
// that start with a prefix) and Deny with a note. The request is the open call at the leaf
// (approval.js), so a reload or another tab shows it too; the decision goes over the socket
// (`approve {toolCallId, decision, scope, prefix, note}`).

import { useMemo, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { commandPrefix, openApproval } from "../approval.js";
import { t, tn } from "../i18n.js";

function CallView({ request }) {
  const { tool, args, command } = request;
  if (tool === "bash") return html`<pre class="approval-command"><code>${command}</code></pre>`;
  if (tool === "edit" && Array.isArray(args.edits)) {
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code></div>
      ${args.edits.map((edit, i) => html`<div key=${i} class="approval-edit">
        <pre class="approval-old" aria-label=${t("Replaced text")}><code>${String(edit?.oldText ?? "")}</code></pre>
        <pre class="approval-new" aria-label=${t("New text")}><code>${String(edit?.newText ?? "")}</code></pre>
      </div>`)}`;
  }
  if (tool === "write") {
    const content = String(args.content ?? "");
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code> · ${tn("{n} character", "{n} characters", content.length)}</div>
      <pre class="approval-new"><code>${content.slice(0, 4000)}${content.length > 4000 ? "\n…" : ""}</code></pre>`;
  }
  return html`<pre class="approval-args"><code>${JSON.stringify(args, null, 2)}</code></pre>`;
}

export function ApprovalPanel({ store, connection }) {
  useStore(store, ["leaf", "tree", "run", "connection"]);
  const snapshot = store.snapshot;
  const request = useMemo(() => (snapshot ? openApproval(snapshot, (id) => store.entry(id)) : null), [snapshot?.activePath, snapshot?.entries]);
  const [note, setNote] = useState("");
  const [prefix, setPrefix] = useState(null);
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  if (!request || store.run.state !== "waiting") return null;
  const offline = store.connection.state !== "live" || store.readOnly;
  const isBash = request.tool === "bash";
  const shownPrefix = prefix ?? commandPrefix(request.command);

  const decide = async (decision, scope = "once") => {
    setSending(true);
    setError(null);
    try {
      await connection.send("approve", {
        toolCallId: request.toolCallId, decision, scope, note: decision === "deny" ? note.trim() : "",
        prefix: decision === "allow" && scope === "session" && isBash ? shownPrefix.trim() : "",
      });
      setNote("");
      setPrefix(null);
    } catch (e) {
      setError(e.message || String(e));
    } finally {
      setSending(false);
    }
  };
  return html`
    <section class="panel clarify-panel approval-panel state-waiting" aria-label=${t("Approval request")} data-tool-call-id=${request.toolCallId}>
      <header class="panel-head"><span class="panel-title">${t("Allow")} <code>${request.tool}</code>?</span><span class="muted">${t("the run goes on when you decide")}</span></header>
      <div class="panel-body">
        <${CallView} request=${request} />
        <div class="clarify-options" role="group" aria-label=${t("Decision")}>
          <button type="button" class="option-button primary" disabled=${sending || offline} onClick=${() => decide("allow")}>${t("Allow once")}</button>
          <button type="button" class="option-button" disabled=${sending || offline} onClick=${() => decide("allow", "session")}>
            ${isBash ? t("Allow commands starting with this prefix") : t("Allow {tool} for this session", { tool: request.tool })}</button>
          ${isBash
            ? html`<label class="visually-hidden" for="approval-prefix">${t("Command prefix")}</label>
                <input id="approval-prefix" class="approval-prefix" type="text" value=${shownPrefix} onInput=${(e) => setPrefix(e.currentTarget.value)} />`
            : null}
        </div>
        <form class="clarify-free" onSubmit=${(e) => { e.preventDefault(); decide("deny"); }}>
          <label class="visually-hidden" for="approval-note">${t("Why not (shown to the agent)")}</label>
          <input id="approval-note" type="text" placeholder=${t("Why not? (optional, shown to the agent)")} value=${note} onInput=${(e) => setNote(e.currentTarget.value)} />
          <button type="submit" class="danger" disabled=${sending || offline}>${t("Deny")}</button>
        </form>
        ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      </div>
    </section>
  `;
}
