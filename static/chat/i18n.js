// The chat page's words in the reader's language. The page embeds the catalog of the
// language Django chose for the request (`neta-i18n`: {lang, catalog}, from
// locale/<lang>/LC_MESSAGES/chat.json; English has none: the source strings are English).
//
//   t("Send")                                   a phrase
//   t("Could not save: {error}", { error })     with values ({error} in the text)
//   tn("{n} step", "{n} steps", count)          plurals by Intl.PluralRules ({n} formatted)
//
// A catalog entry is the translation, or for a plural {one?, other} keyed by the singular.
// Every t()/tn() argument is a plain string literal, so `manage.py chat_messages` finds them
// (docs/development.md, "Translations"). Dates and numbers go through Intl in the page's
// language (formatNumber, formatDate, formatTime).

let lang = "en";
let catalog = {};
let plurals = null;

/** The BCP 47 tag Intl wants for one of Django's language codes ("zh-hans" → "zh-Hans"). */
export function intlLocale(code = lang) {
  const [base, script] = code.split("-");
  if (script && script.length === 4) return `${base}-${script[0].toUpperCase()}${script.slice(1)}`;
  return script ? `${base}-${script.toUpperCase()}` : base;
}

/** Use this language and catalog (the page does it once from `neta-i18n`; tests call it). */
export function setLanguage(code, messages = {}) {
  lang = code || "en";
  catalog = messages || {};
  plurals = null;
}

export function language() {
  return lang;
}

function fill(text, vars) {
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (whole, key) => (Object.prototype.hasOwnProperty.call(vars, key) ? String(vars[key]) : whole));
}

export function t(msgid, vars) {
  const found = catalog[msgid];
  return fill(typeof found === "string" && found ? found : msgid, vars);
}

function pluralCategory(n) {
  try {
    plurals ??= new Intl.PluralRules(intlLocale());
    return plurals.select(n);
  } catch {
    return n === 1 ? "one" : "other";
  }
}

export function tn(one, other, n, vars) {
  const found = catalog[one];
  const category = pluralCategory(n);
  let text;
  if (found && typeof found === "object") text = found[category] || found.other;
  if (!text) text = category === "one" ? one : other;
  return fill(text, { n: formatNumber(n), ...(vars || {}) });
}

export function formatNumber(n, options) {
  try {
    return new Intl.NumberFormat(intlLocale(), options).format(n);
  } catch {
    return String(n);
  }
}

export function formatDate(value, options) {
  const date = value instanceof Date ? value : new Date(value);
  try {
    return new Intl.DateTimeFormat(intlLocale(), options).format(date);
  } catch {
    return date.toISOString();
  }
}

export function formatDateTime(value) {
  return formatDate(value, { dateStyle: "medium", timeStyle: "short" });
}

export function formatTime(value) {
  return formatDate(value, { hour: "2-digit", minute: "2-digit" });
}

function loadFromPage() {
  if (typeof document === "undefined") return;
  const element = document.getElementById("neta-i18n");
  if (!element) return;
  try {
    const value = JSON.parse(element.textContent);
    setLanguage(value.lang, value.catalog);
  } catch {
    /* a broken catalog leaves the page in English */
  }
}

loadFromPage();
