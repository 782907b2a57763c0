// The chat page's words in the reader's language (static/chat/i18n.js): phrases with
// values, plurals by the language's rules, English when a phrase is missing, Intl formats.
import assert from "node:assert/strict";
import { test } from "node:test";

import { formatNumber, intlLocale, language, setLanguage, t, tn } from "../../static/chat/i18n.js";

test("English needs no catalog: the phrase itself, with its values", () => {
  setLanguage("en", {});
  assert.equal(language(), "en");
  assert.equal(t("Could not save: {error}", { error: "offline" }), "Could not save: offline");
  assert.equal(tn("{n} step", "{n} steps", 1), "1 step");
  assert.equal(tn("{n} step", "{n} steps", 1200), "1,200 steps");
  assert.equal(t("Keep {unknown} as it is"), "Keep {unknown} as it is");
});

test("Chinese: the catalog's words, one plural form, English where a phrase is missing", () => {
  setLanguage("zh-hans", { "Could not save: {error}": "无法保存：{error}", "{n} step": { other: "{n} 个步骤" }, Send: "" });
  assert.equal(intlLocale(), "zh-Hans");
  assert.equal(t("Could not save: {error}", { error: "离线" }), "无法保存：离线");
  assert.equal(tn("{n} step", "{n} steps", 1), "1 个步骤");
  assert.equal(tn("{n} step", "{n} steps", 3), "3 个步骤");
  assert.equal(t("Send"), "Send"); // an empty translation falls back to the source
  assert.equal(tn("{n} entry", "{n} entries", 2), "2 entries");
  assert.equal(formatNumber(12345), "12,345");
  setLanguage("en", {});
});
