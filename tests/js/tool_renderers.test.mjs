// The renderer keys Python validates against (tool_renderers.json) are the ones the chat page registers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const dir = new URL("../../static/chat/components/", import.meta.url);

test("tool_renderers.json lists exactly the renderers tool_renderers.js registers", () => {
  const source = readFileSync(new URL("tool_renderers.js", dir), "utf-8");
  const registered = new Set([...source.matchAll(/registerToolRenderer\("([a-z_-]+)"/g)].map((m) => m[1]));
  for (const m of source.matchAll(/for \(const name of \[([^\]]+)\]\)\s*\{\s*registerToolRenderer\(name/g)) {
    for (const n of m[1].matchAll(/"([a-z_-]+)"/g)) registered.add(n[1]);
  }
  const { keys } = JSON.parse(readFileSync(new URL("tool_renderers.json", dir), "utf-8"));
  assert.deepEqual([...registered].sort(), [...keys].sort());
});
