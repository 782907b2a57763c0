// The page's stylesheets parse as their authors meant: every block closed. A rule left
// open swallows every rule after it (a dark theme that never applies, dialogs unstyled),
// and browsers say nothing about it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const SHEETS = ["static/chat/chat.css", "static/console/console.css", "static/console/people.css"];

function openBlocks(css) {
  const text = css.replace(/\/\*[\s\S]*?\*\//g, "").replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  let depth = 0;
  let line = 1;
  for (const ch of text) {
    if (ch === "\n") line += 1;
    else if (ch === "{") depth += 1;
    else if (ch === "}") {
      depth -= 1;
      if (depth < 0) return { depth, line };
    }
  }
  return { depth, line };
}

for (const sheet of SHEETS) {
  test(`${sheet}: every block is closed`, () => {
    const { depth, line } = openBlocks(readFileSync(new URL(`../../${sheet}`, import.meta.url), "utf8"));
    assert.equal(depth, 0, depth < 0 ? `a '}' with no block open, line ${line}` : `${depth} block(s) left open at the end`);
  });
}

test("an unclosed block is found", () => {
  assert.equal(openBlocks("@media (x) { a { b: c; }\n/* } */ d { e: f; }").depth, 1);
  assert.equal(openBlocks('a { content: "}"; }').depth, 0);
});
