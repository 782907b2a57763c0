import { t } from "../i18n.js";
// Code blocks in rendered markdown: a header with the language and a copy button.
//
// The markdown arrives as sanitized HTML (markdown.js), so the header is added to the
// DOM after it is drawn (buttons never pass the sanitizer). Finished messages only: a
// streaming message is redrawn on every frame.

const DONE_MS = 1200;

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

function languageOf(code) {
  const match = /(?:^|\s)language-([\w+#.-]+)/.exec(code.className);
  return match ? match[1] : "text";
}

/** Give every `pre > code` inside `element` its header (once). */
export function decorateCodeBlocks(element) {
  if (!element) return;
  for (const pre of element.querySelectorAll("pre")) {
    const code = pre.querySelector(":scope > code");
    if (!code || pre.parentElement?.classList.contains("code-block")) continue;
    const wrapper = document.createElement("div");
    wrapper.className = "code-block";
    const head = document.createElement("div");
    head.className = "code-head";
    const language = document.createElement("span");
    language.className = "code-lang";
    language.textContent = languageOf(code);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "code-copy";
    button.textContent = t("Copy");
    button.setAttribute("aria-label", t("Copy the {language} code", { language: language.textContent }));
    button.addEventListener("click", async () => {
      const ok = await copyText(code.textContent);
      button.textContent = ok ? t("Copied") : t("Copy failed");
      setTimeout(() => (button.textContent = t("Copy")), DONE_MS);
    });
    head.append(language, button);
    pre.replaceWith(wrapper);
    wrapper.append(head, pre);
  }
}
