// The chat page's pure parts: math delimiters, one-line texts, tree connectors and folds,
// the token meter after a compaction, the /compact command.
import assert from "node:assert/strict";
import { test } from "node:test";
import { findMath, matchDisplayMath, matchInlineMath, mathPlaceholder, mathStart } from "../../static/chat/math.js";
import { plainText } from "../../static/chat/plain_text.js";
import { buildRows, FOLD_MIN, rowGuides, rowText } from "../../static/chat/tree_model.js";
import { meterTokens } from "../../static/chat/context_meter.js";

test("math: inline and display delimiters, backslashes kept", () => {
  assert.deepEqual(matchInlineMath("$a\\,b$ rest"), { raw: "$a\\,b$", tex: "a\\,b", display: false });
  assert.deepEqual(matchInlineMath("\\(x^2\\) rest"), { raw: "\\(x^2\\)", tex: "x^2", display: false });
  assert.deepEqual(matchDisplayMath("$$\\int_0^1 x\\,dx$$"), { raw: "$$\\int_0^1 x\\,dx$$", tex: "\\int_0^1 x\\,dx", display: true });
  assert.deepEqual(matchDisplayMath("\\[ y \\]"), { raw: "\\[ y \\]", tex: "y", display: true });
  assert.equal(matchInlineMath("$$ a $$").display, true); // display math inside a paragraph
});

test("math: dollars that are money, spaces, escapes and blank lines are not math", () => {
  assert.equal(matchInlineMath("$5 and $10"), null); // closing $ followed by a digit
  assert.equal(matchInlineMath("$ x$"), null); // space after the opening $
  assert.equal(matchInlineMath("$x $"), null); // space before the closing $
  assert.equal(matchInlineMath("$a\n\nb$"), null);
  assert.equal(matchInlineMath("$unclosed"), null);
  assert.equal(matchInlineMath("\\(unclosed"), null);
  assert.equal(matchDisplayMath("$$$$"), null);
  assert.deepEqual(matchInlineMath("$a\\$b$"), { raw: "$a\\$b$", tex: "a\\$b", display: false }); // \$ inside does not close
  assert.equal(mathStart("costs \\$3 and $x$"), 14); // an escaped dollar is skipped
  assert.equal(mathStart("no math here"), undefined);
  assert.deepEqual(
    findMath("a $x$ b $5 and $10 c \\(y\\) d $$z$$ e \\[w\\]").map((m) => [m.tex, m.display]),
    [["x", false], ["y", false], ["z", true], ["w", true]],
  );
});

test("math: the placeholder escapes TeX for the sanitizer", () => {
  assert.equal(mathPlaceholder('<img src=x onerror="a">', false), '<span class="math math-inline" data-tex="&lt;img src=x onerror=&quot;a&quot;&gt;">$&lt;img src=x onerror="a"&gt;$</span>');
  assert.match(mathPlaceholder("a & b", true), /^<div class="math math-display" data-tex="a &amp; b">/);
});

test("plain text: markdown marks out of one-line texts", () => {
  assert.equal(plainText("~~old~~ see [the docs](http://x) and ![a cat](c.png)"), "old see the docs and a cat");
  assert.equal(plainText("## **Bold** _it_ `code` *em*"), "Bold it code em");
  assert.equal(plainText("snake_case_name and 2*3*4"), "snake_case_name and 2*3*4");
  assert.equal(plainText("> quoted\n- [x] done\n1. first"), "quoted\ndone\nfirst");
});

const msg = (id, parentId, role, text) => ({ type: "message", id, parentId, message: { role, content: [{ type: "text", text }] } });

function snapshotOf(entries, leafId) {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const children = {};
  for (const e of entries) (children[e.parentId ?? "root"] ??= []).push(e.id);
  const path = [];
  for (let c = leafId; c; c = byId.get(c).parentId) path.unshift(c);
  return { snapshot: { entries, leafId, activePath: path, childrenByParentId: children, labelsByEntryId: {}, inFlight: null, page: { truncated: false } }, lookup: (id) => byId.get(id) };
}

// r - a - b (branch point) ─ c - d - e          (the active path)
//                           ├ f - g             (short: not folded)
//                           └ h - i - j - k - l - m (long: folded to h, ⋯ 4, m)
const tree = [
  msg("r", null, "user", "root"), msg("a", "r", "assistant", "a"), msg("b", "a", "user", "b"),
  msg("c", "b", "assistant", "c"), msg("d", "c", "user", "d"), msg("e", "d", "assistant", "e"),
  msg("f", "b", "assistant", "f"), msg("g", "f", "user", "g"),
  msg("h", "b", "assistant", "h"), msg("i", "h", "user", "i"), msg("j", "i", "assistant", "j"), msg("k", "j", "user", "k"), msg("l", "k", "assistant", "l"), msg("m", "l", "user", "m"),
  msg("n", "m", "assistant", "n"), msg("o", "n", "user", "o"),
];

test("tree: siblings start with ├/└ connectors, a chain continues under │ or blank, runs off the path fold", () => {
  const { snapshot, lookup } = snapshotOf(tree, "e");
  const { rows } = buildRows({ snapshot, lookup });
  const drawn = rows.map((r) => `${rowGuides(r).join("")}${r.kind === "fold" ? rowText(r) : r.id}`);
  assert.deepEqual(drawn, ["r", "a", "b", "├c", "│d", "│e", "├f", "│g", "└h", " ⋯ 6 more entries", " o"]);
  assert.equal(FOLD_MIN, 6);
  const fold = rows.find((r) => r.kind === "fold");
  assert.equal(fold.foldOf, "h");
  assert.equal(fold.count, 6);
  // Unfolded for good once expanded.
  const open = buildRows({ snapshot, lookup, expanded: new Set(["h"]) }).rows.map((r) => `${rowGuides(r).join("")}${r.id}`);
  assert.deepEqual(open.slice(8), ["└h", " i", " j", " k", " l", " m", " n", " o"]);
});

test("tree: a run that holds the leaf is never folded, nested branches draw every level", () => {
  const { snapshot, lookup } = snapshotOf(tree, "o");
  const rows = buildRows({ snapshot, lookup }).rows;
  assert.equal(rows.some((r) => r.kind === "fold"), false);
  const nested = [...tree, msg("x", "j", "user", "x")]; // j becomes a branch point inside the last branch
  const n = snapshotOf(nested, "e");
  const drawn = buildRows(n).rows.map((r) => `${rowGuides(r).join("")}${r.id}`);
  assert.deepEqual(drawn.slice(8), ["└h", " i", " j", " ├k", " │l", " │m", " │n", " │o", " └x"]);
});

test("meter: after a compaction the figure is the summary and the kept entries, not the old usage", () => {
  const big = "x".repeat(4000);
  const entries = [
    msg("u1", null, "user", big),
    { ...msg("a1", "u1", "assistant", big), message: { role: "assistant", content: [{ type: "text", text: big }], usage: { input: 3000, output: 1000 } } },
    msg("u2", "a1", "user", "y".repeat(400)),
    { type: "compaction", id: "c1", parentId: "u2", summary: "s".repeat(200), firstKeptEntryId: "u2", tokensBefore: 2100 },
  ];
  const { snapshot, lookup } = snapshotOf(entries, "c1");
  snapshot.runtimeContext = { tokenEstimate: 2100 };
  assert.deepEqual(meterTokens(snapshot, lookup, { tokens: 2100 }), { tokens: 50 + 100, approximate: true });
  // Once an answer came after it, its usage is the figure again.
  const after = [...entries, msg("u3", "c1", "user", "q"), { ...msg("a3", "u3", "assistant", "r"), message: { role: "assistant", content: [], usage: { input: 160, output: 2 } } }];
  const s2 = snapshotOf(after, "a3");
  s2.snapshot.runtimeContext = { tokenEstimate: 162 };
  assert.deepEqual(meterTokens(s2.snapshot, s2.lookup, null), { tokens: 162, approximate: false });
});

import { shownTitle, untouched } from "../../static/chat/session_title.js";

function fakeStore(entries, title = "") {
  const byId = new Map(entries.map((e) => [e.id, e]));
  return { snapshot: { session: { title }, entries, activePath: entries.map((e) => e.id), page: null }, entry: (id) => byId.get(id) };
}

test("a session's shown title: a fresh one is a New session, not an Untitled one", () => {
  const notes = [
    { id: "a", type: "model_change", parentId: null, modelId: "m" },
    { id: "b", type: "thinking_level_change", parentId: "a", thinkingLevel: "low" },
  ];
  assert.equal(untouched(fakeStore(notes)), true);
  assert.deepEqual(shownTitle(fakeStore(notes)), { text: "New session", named: false });
  const talked = [...notes, { id: "c", type: "message", parentId: "b", message: { role: "user", content: [{ type: "text", text: "hello **there**" }] } }];
  assert.deepEqual(shownTitle(fakeStore(talked)), { text: "hello there", named: false });
  assert.deepEqual(shownTitle(fakeStore(talked, "Named")), { text: "Named", named: true });
  assert.deepEqual(shownTitle(fakeStore(notes), "From the server"), { text: "From the server", named: true });
  // Only an answer (no user message on the path): something was written, so it is untitled.
  const answerOnly = [...notes, { id: "d", type: "message", parentId: "b", message: { role: "assistant", content: [] } }];
  assert.deepEqual(shownTitle(fakeStore(answerOnly)), { text: "Untitled session", named: false });
  assert.equal(untouched({ snapshot: null }), false);
});
