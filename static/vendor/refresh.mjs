#!/usr/bin/env node
// Refreshes the vendored browser modules under static/vendor/ from the npm registry.
//
//   node static/vendor/refresh.mjs            fetch the pinned versions in manifest.json
//   node static/vendor/refresh.mjs --latest   move every package to its newest release first
//   node static/vendor/refresh.mjs --check    verify the files against the recorded sha256 (offline)
//
// Packages are fetched with `npm pack` (the ordinary npm client, honouring the user's
// npm configuration) and unpacked with `tar`; only the files the manifest names are
// copied. The manifest records each copied file's sha256, so `--check` (run by the
// node tests) notices a hand-edited or missing vendor file.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const MANIFEST = join(HERE, "manifest.json");

export function sha256(path) {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

export function loadManifest() {
  return JSON.parse(readFileSync(MANIFEST, "utf8"));
}

export function checkFiles(manifest = loadManifest(), root = HERE) {
  const problems = [];
  for (const pkg of manifest.packages) {
    for (const target of Object.values(pkg.files)) {
      const path = join(root, target);
      const want = manifest.sha256[target];
      if (!existsSync(path)) problems.push(`${target}: missing`);
      else if (!want) problems.push(`${target}: no recorded sha256`);
      else if (sha256(path) !== want) problems.push(`${target}: sha256 differs from the manifest`);
    }
  }
  return problems;
}

function npm(args, cwd) {
  return execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
}

function fetchPackage(pkg, work) {
  const out = JSON.parse(npm(["pack", `${pkg.name}@${pkg.version}`, "--json", "--pack-destination", work], work));
  const tarball = join(work, out[0].filename);
  const unpacked = join(work, out[0].filename.replace(/\.tgz$/, ""));
  mkdirSync(unpacked, { recursive: true });
  execFileSync("tar", ["xzf", tarball, "-C", unpacked]);
  return { root: join(unpacked, "package"), integrity: out[0].integrity };
}

function main(argv) {
  const manifest = loadManifest();
  if (argv.includes("--check")) {
    const problems = checkFiles(manifest);
    for (const p of problems) console.error(p);
    console.log(problems.length ? `${problems.length} problem(s)` : "vendor files match the manifest");
    return problems.length ? 1 : 0;
  }
  const latest = argv.includes("--latest");
  const work = mkdtempSync(join(tmpdir(), "neta-vendor-"));
  try {
    const hashes = {};
    for (const pkg of manifest.packages) {
      if (latest) {
        const newest = npm(["view", pkg.name, "version"], work).trim();
        if (newest !== pkg.version) console.log(`${pkg.name}: ${pkg.version} -> ${newest}`);
        pkg.version = newest;
      }
      const { root, integrity } = fetchPackage(pkg, work);
      pkg.integrity = integrity;
      for (const [source, target] of Object.entries(pkg.files)) {
        const from = join(root, source);
        if (!existsSync(from)) throw new Error(`${pkg.name}@${pkg.version} has no ${source}: update manifest.json`);
        const to = join(HERE, target);
        mkdirSync(dirname(to), { recursive: true });
        copyFileSync(from, to);
        hashes[target] = sha256(to);
      }
      console.log(`${pkg.name}@${pkg.version}: ${Object.keys(pkg.files).length} file(s)`);
    }
    manifest.sha256 = Object.fromEntries(Object.entries(hashes).sort());
    writeFileSync(MANIFEST, JSON.stringify(manifest, null, 2) + "\n");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
