// What a new (empty) session shows: the agent, what it is for, a few prompts to
// start with, and where the keyboard shortcuts are.

import { html } from "./html.js";
import { language, t } from "../i18n.js";

// In the reader's language: the prompt is sent as written, so the agent answers in it too.
const STARTERS = () => [
  { title: t("What can you do?"), prompt: t("What can you do? List the tools you can use and give an example of each.") },
  { title: t("Look at my workspace"), prompt: t("What is in my workspace? Give me a short overview.") },
  { title: t("Explain with an example"), prompt: t("Explain how a git rebase differs from a merge, with a small example.") },
  { title: t("Plan a task"), prompt: t("Help me plan a small task step by step. Ask me what the task is first.") },
];

// Chinese sentences follow each other without a space.
const SENTENCE_GAP = () => (language().startsWith("zh") ? "" : " ");

export function FirstScreen({ agent, onStarter }) {
  return html`
    <section class="first-screen" aria-labelledby="first-screen-title">
      <h2 id="first-screen-title" class="first-screen-title">${agent.name}</h2>
      <p class="first-screen-description">${agent.description || t("An agent with a model and tools. Ask it anything to begin.")}</p>
      <p class="muted first-screen-model">${agent.model.displayName}${agent.thinkingLevel && agent.thinkingLevel !== "off" ? ` · ${t("thinking {level}", { level: agent.thinkingLevel })}` : ""}</p>
      <ul class="starters" aria-label=${t("Starter prompts")}>
        ${STARTERS().map(
          (s) => html`<li key=${s.title}><button type="button" class="starter" onClick=${() => onStarter(s.prompt)}>
            <span class="starter-title">${s.title}</span><span class="starter-prompt">${s.prompt}</span>
          </button></li>`,
        )}
      </ul>
      <p class="muted first-screen-keys"><span class="keys-hint">${t("Press")} <kbd>?</kbd> ${t("for keyboard shortcuts.")}${SENTENCE_GAP()}</span>${t("Every answer is a node in the tree: branch from any message with “Continue from here”.")}</p>
    </section>
  `;
}
