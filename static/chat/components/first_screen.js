// What a new (empty) session shows: the agent, what it is for, a few prompts to
// start with, and where the keyboard shortcuts are.

import { html } from "./html.js";

const STARTERS = [
  { title: "What can you do?", prompt: "What can you do? List the tools you can use and give an example of each." },
  { title: "Look at my workspace", prompt: "What is in my workspace? Give me a short overview." },
  { title: "Explain with an example", prompt: "Explain how a git rebase differs from a merge, with a small example." },
  { title: "Plan a task", prompt: "Help me plan a small task step by step. Ask me what the task is first." },
];

export function FirstScreen({ agent, onStarter }) {
  return html`
    <section class="first-screen" aria-labelledby="first-screen-title">
      <h2 id="first-screen-title" class="first-screen-title">${agent.name}</h2>
      <p class="first-screen-description">${agent.description || "An agent with a model and tools. Ask it anything to begin."}</p>
      <p class="muted first-screen-model">${agent.model.displayName}${agent.thinkingLevel && agent.thinkingLevel !== "off" ? ` · thinking ${agent.thinkingLevel}` : ""}</p>
      <ul class="starters" aria-label="Starter prompts">
        ${STARTERS.map(
          (s) => html`<li key=${s.title}><button type="button" class="starter" onClick=${() => onStarter(s.prompt)}>
            <span class="starter-title">${s.title}</span><span class="starter-prompt">${s.prompt}</span>
          </button></li>`,
        )}
      </ul>
      <p class="muted first-screen-keys"><span class="keys-hint">Press <kbd>?</kbd> for keyboard shortcuts. </span>Every answer is a node in the tree: branch from any message with “Continue from here”.</p>
    </section>
  `;
}
