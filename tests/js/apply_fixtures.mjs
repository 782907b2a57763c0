// Applies store fixtures with the browser store and prints one JSON report:
//   node tests/js/apply_fixtures.mjs DIR   ->  {"checked": N, "failures": [{name, problem}]}
// pytest runs it on fixtures it has just generated from real provider operations.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { checkFixture } from "./fixture_check.mjs";

const dir = process.argv[2];
const failures = [];
let checked = 0;
for (const name of readdirSync(dir).filter((n) => n.endsWith(".json")).sort()) {
  const fixture = JSON.parse(readFileSync(join(dir, name), "utf8"));
  checked += 1;
  const problem = checkFixture(fixture);
  if (problem) failures.push({ name, problem });
}
process.stdout.write(JSON.stringify({ checked, failures }) + "\n");
