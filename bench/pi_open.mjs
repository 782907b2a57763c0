// Pi's own time to open a session file and build its context, for bench/.
//
//   node bench/pi_open.mjs FILE
//
// Loads Pi 0.73.1 from the pi-oracle install (PI_ORACLE_HOME, default
// ~/.cache/neta-pi-oracle; run ../shared/pi-oracle/oracle once to install it),
// with Pi's agent dir in a throw-away folder and offline mode on, like the
// oracle. Opens a temporary copy (Pi may rewrite files it opens) and prints one
// JSON object: {"openMs", "contextMs", "totalMs", "entries", "messages"}.
// The copy is made before the clock starts; Pi's import time is not counted.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

const file = process.argv[2];
if (!file) {
	process.stderr.write("usage: node bench/pi_open.mjs FILE\n");
	process.exit(64);
}
const home = process.env.PI_ORACLE_HOME ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "neta-pi-oracle");
const work = mkdtempSync(join(tmpdir(), "neta-bench-pi-"));
process.on("exit", () => rmSync(work, { recursive: true, force: true }));
process.env.PI_CODING_AGENT_DIR = join(work, "agent");
process.env.PI_OFFLINE = "1";

const entry = join(home, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "index.js");
const { SessionManager } = await import(pathToFileURL(entry).href);

const copy = join(work, basename(file));
copyFileSync(file, copy);

const t0 = process.hrtime.bigint();
const manager = SessionManager.open(copy, work);
const t1 = process.hrtime.bigint();
const context = manager.buildSessionContext();
const t2 = process.hrtime.bigint();
const ms = (a, b) => Number(b - a) / 1e6;
process.stdout.write(
	`${JSON.stringify({
		openMs: ms(t0, t1),
		contextMs: ms(t1, t2),
		totalMs: ms(t0, t2),
		entries: manager.getEntries().length,
		messages: context.messages.length,
	})}\n`,
);
