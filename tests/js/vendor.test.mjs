// The vendored modules are what the manifest says (refresh.mjs records the hashes).
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkFiles, loadManifest } from "../../static/vendor/refresh.mjs";

test("every vendored file matches its recorded sha256", () => {
  const manifest = loadManifest();
  assert.ok(manifest.packages.length >= 5);
  for (const pkg of manifest.packages) assert.match(pkg.version, /^\d+\.\d+\.\d+$/, pkg.name);
  assert.deepEqual(checkFiles(manifest), []);
});

test("a changed file is noticed", () => {
  const manifest = loadManifest();
  const first = Object.keys(manifest.sha256)[0];
  manifest.sha256[first] = "0".repeat(64);
  assert.deepEqual(checkFiles(manifest), [`${first}: sha256 differs from the manifest`]);
});
