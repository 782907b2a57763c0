// The approval panel: while the run waits for a person to allow a tool call, the exact call
// sits at the composer (bash: the command; edit and write: the diff against the file as it is,
// else the replacements or the content; other tools: the arguments) with Allow once, Allow for this session (the tool, or for bash the commands
// that start with a prefix) and Deny with a note. The request is the open call at the leaf
// (approval.js), so a reload or another tab shows it too; the decision goes over the socket
// (`approve {toolCallId, decision, scope, prefix, note}`).
//
// A subagent child's request (docs/subagents.md, "Approvals") is shown the same way, under the
// child's name and task: the list is `GET /api/sessions/{id}/approvals/` (the truth, so a reload
// shows it), read again whenever a child starts or stops waiting (subagents.js::approvalsKey);
// the decision is `approve` with the child's `subagentRunId`.

import { useEffect, useMemo, useState } from "preact/hooks";
import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { commandPrefix, openApproval } from "../approval.js";
import { sessionApi } from "../api.js";
import { t, tn } from "../i18n.js";
import { approvalsKey } from "../subagents.js";

/** A unified diff, each line marked as added, removed or a hunk header. */
function DiffView({ diff }) {
  const kind = (line) => (line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "ctx");
  return html`<pre class="approval-diff" aria-label=${t("The change to the file")}><code>${String(diff).split("\n").map((line, i) => html`<span key=${i} class=${`diff-${kind(line)}`}>${line}\n</span>`)}</code></pre>`;
}

function CallView({ request }) {
  const { tool, args, command } = request;
  if (tool === "bash") return html`<pre class="approval-command"><code>${command}</code></pre>`;
  const problem = request.previewError ? html`<div class="approval-problem" role="note">${t("As asked, this call would fail: {error}", { error: request.previewError })}</div>` : null;
  if (tool === "edit" && request.diffOf === "file" && request.diff) {
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code></div><${DiffView} diff=${request.diff} />`;
  }
  if (tool === "edit" && Array.isArray(args.edits)) {
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code></div>${problem}
      ${args.edits.map((edit, i) => html`<div key=${i} class="approval-edit">
        <pre class="approval-old" aria-label=${t("Replaced text")}><code>${String(edit?.oldText ?? "")}</code></pre>
        <pre class="approval-new" aria-label=${t("New text")}><code>${String(edit?.newText ?? "")}</code></pre>
      </div>`)}`;
  }
  if (tool === "write" && request.diffOf === "file" && request.diff) {
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code> · ${request.created ? t("a new file") : t("replaces the file")}</div><${DiffView} diff=${request.diff} />`;
  }
  if (tool === "write") {
    const content = String(args.content ?? "");
    return html`<div class="approval-path"><code>${String(args.path ?? "")}</code> · ${tn("{n} character", "{n} characters", content.length)}</div>
      <pre class="approval-new"><code>${content.slice(0, 4000)}${content.length > 4000 ? "\n…" : ""}</code></pre>`;
  }
  return html`<pre class="approval-args"><code>${JSON.stringify(args, null, 2)}</code></pre>`;
}

/** What the server holds of a listed request beyond the call: the edit's diff against the file. */
const shownOf = (listed) => ({ diff: listed?.diff, diffOf: listed?.diffOf, previewError: listed?.previewError, created: listed?.created });

export function ApprovalPanel({ store, connection }) {
  useStore(store, ["subagents", "connection", "leaf", "tree", "run"]);
  const snapshot = store.snapshot;
  const own = useMemo(() => (snapshot ? openApproval(snapshot, (id) => store.entry(id)) : null), [snapshot?.activePath, snapshot?.entries]);
  const ownWaiting = own && store.run.state === "waiting" ? own : null;
  // The list (`GET approvals/`) is the truth for the children's requests and holds the run's own
  // request as the server made it; read again when a child or the run starts or stops waiting.
  const key = `${approvalsKey(store.subagents)}|${ownWaiting?.toolCallId ?? ""}`;
  const live = store.connection.state === "live";
  const [listed, setListed] = useState([]);
  const [reads, setReads] = useState(0);
  useEffect(() => {
    if (!store.sessionId || !live) return undefined;
    let stale = false;
    sessionApi(store.sessionId)
      .approvals()
      .then((body) => { if (!stale) setListed(body?.approvals ?? []); })
      .catch(() => {});
    return () => { stale = true; };
  }, [store.sessionId, key, live, reads]);
  const children = listed.filter((a) => a.subagent);
  const ownListed = ownWaiting ? listed.find((a) => !a.subagent && a.toolCallId === ownWaiting.toolCallId) : null;
  return html`${children.map(
    (request) => html`<${RequestPanel} key=${`${request.subagent.runId}/${request.toolCallId}`} store=${store} connection=${connection}
      request=${{ toolCallId: request.toolCallId, tool: request.tool, args: request.arguments ?? {}, command: request.command ?? "", subagent: request.subagent, ...shownOf(request) }}
      onDecided=${() => setReads((n) => n + 1)} />`,
  )}${ownWaiting ? html`<${RequestPanel} key=${ownWaiting.toolCallId} store=${store} connection=${connection} request=${{ ...ownWaiting, ...shownOf(ownListed) }} />` : null}`;
}

function RequestPanel({ store, connection, request, onDecided }) {
  const [note, setNote] = useState("");
  const [prefix, setPrefix] = useState(null);
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  const child = request.subagent ?? null;
  // The run's own panel keeps its plain ids; a child's are its own (several may wait at once).
  const ids = child ? { prefix: `approval-prefix-${child.runId}-${request.toolCallId}`, note: `approval-note-${child.runId}-${request.toolCallId}` } : { prefix: "approval-prefix", note: "approval-note" };
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
        ...(child ? { subagentRunId: child.runId } : {}),
      });
      setNote("");
      setPrefix(null);
      onDecided?.();
    } catch (e) {
      setError(e.message || String(e));
    } finally {
      setSending(false);
    }
  };
  return html`
    <section class="panel clarify-panel approval-panel state-waiting" aria-label=${child ? t("Approval request of subagent {agent}", { agent: child.agent }) : t("Approval request")}
      data-tool-call-id=${request.toolCallId} data-subagent-run-id=${child?.runId}>
      <header class="panel-head">
        ${child
          ? html`<span class="panel-title">${t("Subagent {agent} asks", { agent: child.agent })}: ${t("Allow")} <code>${request.tool}</code>?</span><span class="muted">${t("the subagent goes on when you decide")}</span>`
          : html`<span class="panel-title">${t("Allow")} <code>${request.tool}</code>?</span><span class="muted">${t("the run goes on when you decide")}</span>`}
      </header>
      <div class="panel-body">
        ${child ? html`<div class="approval-child muted">${t("Task: {task}", { task: child.task })}</div>` : null}
        <${CallView} request=${request} />
        <div class="clarify-options" role="group" aria-label=${t("Decision")}>
          <button type="button" class="option-button primary" disabled=${sending || offline} onClick=${() => decide("allow")}>${t("Allow once")}</button>
          <button type="button" class="option-button" disabled=${sending || offline} onClick=${() => decide("allow", "session")}>
            ${isBash ? t("Allow commands starting with this prefix") : t("Allow {tool} for this session", { tool: request.tool })}</button>
          ${isBash
            ? html`<label class="visually-hidden" for=${ids.prefix}>${t("Command prefix")}</label>
                <input id=${ids.prefix} class="approval-prefix" type="text" value=${shownPrefix} onInput=${(e) => setPrefix(e.currentTarget.value)} />`
            : null}
        </div>
        <form class="clarify-free" onSubmit=${(e) => { e.preventDefault(); decide("deny"); }}>
          <label class="visually-hidden" for=${ids.note}>${t("Why not (shown to the agent)")}</label>
          <input id=${ids.note} class="approval-note" type="text" placeholder=${t("Why not? (optional, shown to the agent)")} value=${note} onInput=${(e) => setNote(e.currentTarget.value)} />
          <button type="submit" class="danger" disabled=${sending || offline}>${t("Deny")}</button>
        </form>
        ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
      </div>
    </section>
  `;
}
