// The two smallest pieces of the one visual language (docs/chat.md, "Panels and state
// tokens"): the state badge (a status word in its token's colour) and the action bar (a
// run's or a message's outcome with what can be done about it, e.g. Retry). Tool cards,
// subagent rows, the plan, the question, thinking and these bars all take a `state-<token>`
// class; the badge and the bar are drawn here so that every component draws them alike.

import { html } from "./html.js";
import { STATE_LABELS, stateToken } from "../state_tokens.js";
import { t } from "../i18n.js";

export function StateBadge({ status, label = null }) {
  const token = stateToken(status);
  return html`<span class=${`state-badge state-${token}`} data-state=${token}>${label ?? STATE_LABELS[token]}</span>`;
}

/**
 * An outcome bar (`ActionRetryBar` in the design): the state badge, what happened, and
 * the actions (`Retry` when `onRetry` is given). `status` is any status word (a failed
 * answer: "failed", an aborted one: "aborted", one cut at the output limit: "partial").
 */
export function ActionRetryBar({ status, label = null, text, onRetry = null, retryTitle = "", className = "", action = null }) {
  const token = stateToken(status);
  return html`
    <div class=${`panel action-bar state-${token}${className ? ` ${className}` : ""}`} data-state=${token} role=${token === "failed" ? "alert" : "note"}>
      <div class="panel-head">
        <${StateBadge} status=${status} label=${label} />
        <span class="action-bar-text">${text}</span>
        <span class="spacer"></span>
        ${onRetry ? html`<button type="button" class="icon-button action-retry" onClick=${onRetry} title=${retryTitle || undefined}>${t("Retry")}</button>` : null}
        ${action}
      </div>
    </div>
  `;
}
