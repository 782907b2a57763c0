// A part of the page that fails while drawing shows that it failed, not a blank page.
//
// Preact unmounts the whole tree when a component throws and nothing catches it:
// one bad entry used to blank the chat. Each panel (conversation, tree, session
// list, status bar) sits in a Boundary; each conversation item is its own
// boundary too (EntryItem), so a failure there is marked on that entry only.

import { Component } from "preact";
import { html } from "./html.js";
import { t } from "../i18n.js";

export class Boundary extends Component {
  componentDidCatch(error) {
    console.error(`neta: the ${this.props.name} could not be drawn`, error);
    this.setState({ error });
  }

  render({ name, label, children }, { error }) {
    if (!error) return children;
    return html`
      <div class="panel-failed" role="alert" data-panel-failed=${name}>
        <p>${t("The {part} could not be shown:", { part: label ?? name })} ${String(error?.message ?? error)}</p>
        <button type="button" class="link-button" onClick=${() => this.setState({ error: null })}>${t("Try again")}</button>
      </div>
    `;
  }
}
