// The composer's pickers: the model and the thinking level the next prompt's
// run will use, from the models this page may use (enabled, with their key set; the
// server checks again), thinking levels only where the model supports thinking; and
// whether Enter sends (on by default; a phone user may turn it off: remembered).

import { html } from "./html.js";
import { useStore } from "./hooks.js";
import { chosenModel } from "../composer_model.js";
import { t } from "../i18n.js";

export { chosenModel, promptChoice } from "../composer_model.js";

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"];

export function Pickers({ store, models, agentModel, choice, setChoice, enterSends, setEnterSends, disabled }) {
  useStore(store, ["context"]);
  const model = chosenModel(models, choice, agentModel);
  const pathLevel = store.snapshot?.runtimeContext?.thinkingLevel ?? "off";
  const level = model.supportsThinking ? choice?.thinkingLevel ?? pathLevel : "off";
  return html`
    <div class="pickers">
      <label class="picker">
        <span class="visually-hidden">${t("Model for the next prompt")}</span>
        <select id="model-picker" aria-label=${t("Model for the next prompt")} value=${model.name} disabled=${disabled}
          onChange=${(e) => setChoice({ ...choice, model: e.currentTarget.value })}>
          ${models.map((m) => html`<option value=${m.name} title=${capabilities(m)}>${m.displayName}</option>`)}
        </select>
      </label>
      <label class="picker">
        <span class="visually-hidden">${t("Thinking level for the next prompt")}</span>
        <select id="thinking-picker" aria-label=${t("Thinking level for the next prompt")} value=${level} disabled=${disabled || !model.supportsThinking}
          title=${model.supportsThinking ? t("How much the model thinks before answering") : t("{model} does not think", { model: model.displayName })}
          onChange=${(e) => setChoice({ ...choice, thinkingLevel: e.currentTarget.value })}>
          ${THINKING_LEVELS.map((level) => html`<option value=${level}>${level === "off" ? t("thinking off") : t("thinking: {level}", { level })}</option>`)}
        </select>
      </label>
      <label class="enter-toggle" title=${t("When off, Enter is a new line and the Send button sends (Ctrl+Enter always sends)")}>
        <input type="checkbox" checked=${enterSends} onChange=${(e) => setEnterSends(e.currentTarget.checked)} /> ${t("Enter sends")}
      </label>
    </div>
  `;
}

function capabilities(model) {
  const can = [model.supportsTools ? t("tools") : null, model.supportsThinking ? t("thinking") : null, model.supportsImages ? t("images") : null].filter(Boolean);
  return can.length ? t("takes {what}", { what: can.join(", ") }) : t("text only");
}
