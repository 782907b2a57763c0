// The web tools' cards link only http(s) URLs from search results (the open web's data).
import { test } from "node:test";
import assert from "node:assert/strict";
import { safeHttpUrl, searchResults } from "../../static/chat/web_results.js";

test("only http and https URLs become links", () => {
  assert.equal(safeHttpUrl("https://example.org/pi"), "https://example.org/pi");
  assert.equal(safeHttpUrl("http://example.org"), "http://example.org/");
  for (const bad of ["javascript:alert(1)", "JAVASCRIPT:alert(1)", " javascript:alert(1)", "data:text/html,<b>x</b>", "file:///etc/passwd", "vbscript:x", "//example.org", "example.org", "", null, 7, {}]) {
    assert.equal(safeHttpUrl(bad), null, String(bad));
  }
});

test("search results are read defensively from details", () => {
  const details = {
    results: [
      { title: "Pi", url: "https://example.org/pi", snippet: "JSONL trees", published: "2026-11-30" },
      { title: "Evil", url: "javascript:alert(1)", snippet: "<img src=x onerror=alert(1)>" },
      { url: "https://example.net/untitled" },
      null,
      "junk",
      { title: { nested: true }, url: 12, snippet: ["x"] },
    ],
  };
  assert.deepEqual(searchResults(details), [
    { title: "Pi", url: "https://example.org/pi", snippet: "JSONL trees", published: "2026-11-30" },
    { title: "Evil", url: null, snippet: "<img src=x onerror=alert(1)>", published: "" },
    { title: "https://example.net/untitled", url: "https://example.net/untitled", snippet: "", published: "" },
    { title: "", url: null, snippet: "", published: "" },
  ]);
  assert.deepEqual(searchResults(undefined), []);
  assert.deepEqual(searchResults({ results: "nope" }), []);
});
