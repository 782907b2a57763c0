"""Pi sessions for the oracle tests: a builder that writes a Pi v3 session file the way Pi's
SessionManager would, generated sessions of many shapes, and a driver that runs many jobs
of Pi's compaction and branch summarization in one node process."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from sessions_tree.compaction import CompactionSettings, compaction_requests, compaction_result, prepare_compaction
from sessions_tree.context import estimate_tokens
from sessions_tree.entries import (
    branch_summary_entry,
    compaction_entry,
    custom_entry,
    custom_message_entry,
    label_entry,
    message_entry,
    model_change_entry,
    session_header,
    session_info_entry,
    subagent_result_entry,
    thinking_level_change_entry,
)
from sessions_tree.ids import ms_to_iso
from sessions_tree.jsonl import dumps, loads
from sessions_tree.path import get_path
from tests.support.services import FIXTURES

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/x8AAwMCAO+ip1sAAAAASUVORK5CYII="


# --------------------------------------------------------------------------- session builder


class SessionBuilder:
    """Writes a Pi v3 session the way Pi's SessionManager would: every append is a
    child of the current leaf and becomes the leaf; ids are unique 8-hex strings;
    entry timestamps advance by one second, message timestamps follow them."""

    def __init__(self, tag: int = 0, start_ms: int = 1_750_000_000_000):
        self.entries: list[dict] = []
        self.leaf: str | None = None
        self.clock = start_ms
        self.tag = tag
        self._n = 0
        self._calls = 0
        self.ctx_tokens = 2000

    # -- plumbing
    def _next(self) -> tuple[str, str]:
        self._n += 1
        self.clock += 1000
        return f"{self.tag:02x}{self._n:06x}", ms_to_iso(self.clock)

    def add(self, build, **fields) -> dict:
        entry_id, ts = self._next()
        entry = build(id=entry_id, parent_id=self.leaf, timestamp=ts, **fields)
        self.entries.append(entry)
        self.leaf = entry_id
        return entry

    def branch_from(self, entry_id: str | None) -> None:
        self.leaf = entry_id

    def text(self) -> str:
        header = session_header(
            session_id=f"0197a000-0000-7000-8000-{self.tag:012x}",
            timestamp=ms_to_iso(1_750_000_000_000),
            cwd="/work/proj",
        )
        return "".join(dumps(e) + "\n" for e in [header, *self.entries])

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path

    def call_id(self) -> str:
        self._calls += 1
        return f"toolu_{self.tag:02x}{self._calls:05d}"

    # -- messages
    def user(self, content) -> dict:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return self.add(message_entry, message={"role": "user", "content": content, "timestamp": self.clock + 1000})

    def assistant(
        self, blocks: list, *, stop_reason: str | None = None, usage: bool = True, model: str = "claude-test"
    ) -> dict:
        self.ctx_tokens += 150
        message = {
            "role": "assistant",
            "content": blocks,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": model,
        }
        if usage:
            message["usage"] = {
                "input": 3,
                "output": 90,
                "cacheRead": self.ctx_tokens,
                "cacheWrite": 150,
                "totalTokens": self.ctx_tokens + 243,
                "cost": {
                    "input": 0.000009,
                    "output": 0.00135,
                    "cacheRead": 0.0006,
                    "cacheWrite": 0.0005625,
                    "total": 0.0025,
                },
            }
        has_calls = any(b.get("type") == "toolCall" for b in blocks)
        message["stopReason"] = stop_reason or ("toolUse" if has_calls else "stop")
        message["timestamp"] = self.clock + 500
        return self.add(message_entry, message=message)

    def tool_result(self, call: dict, content, *, is_error: bool = False, details=None) -> dict:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        message = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"], "content": content}
        if details is not None:
            message["details"] = details
        message["isError"] = is_error
        message["timestamp"] = self.clock + 1000
        return self.add(message_entry, message=message)

    def bash(
        self,
        command: str,
        output: str,
        *,
        exit_code=0,
        cancelled=False,
        truncated=False,
        full_output_path=None,
        exclude=False,
    ) -> dict:
        message = {
            "role": "bashExecution",
            "command": command,
            "output": output,
            "exitCode": exit_code,
            "cancelled": cancelled,
            "truncated": truncated,
        }
        if full_output_path:
            message["fullOutputPath"] = full_output_path
        message["timestamp"] = self.clock + 1000
        if exclude:
            message["excludeFromContext"] = True
        return self.add(message_entry, message=message)

    def tool_call(self, name: str, arguments: dict) -> dict:
        return {"type": "toolCall", "id": self.call_id(), "name": name, "arguments": arguments}

    def step(
        self,
        name: str,
        arguments: dict,
        result,
        *,
        text: str | None = None,
        thinking: str | None = None,
        is_error=False,
    ):
        """One assistant message with one tool call, then its result."""
        call = self.tool_call(name, arguments)
        blocks = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "thinkingSignature": "sig"})
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append(call)
        self.assistant(blocks)
        self.tool_result(call, result, is_error=is_error)

    def say(self, text: str, **kw) -> dict:
        return self.assistant([{"type": "text", "text": text}], **kw)

    # -- other entries
    def custom_message(self, custom_type: str, content, *, display=True, details=None) -> dict:
        return self.add(
            custom_message_entry, custom_type=custom_type, content=content, display=display, details=details
        )

    def branch_summary(self, summary: str, *, details=None, from_hook=False) -> dict:
        return self.add(
            branch_summary_entry, from_id=self.leaf or "root", summary=summary, details=details, from_hook=from_hook
        )

    def compaction(
        self, summary: str, first_kept_entry_id: str, tokens_before: int, *, details=None, from_hook=False
    ) -> dict:
        return self.add(
            compaction_entry,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            details=details,
            from_hook=from_hook,
        )

    def label(self, target_id: str, label: str | None) -> dict:
        return self.add(label_entry, target_id=target_id, label=label)

    def model_change(self, provider: str, model_id: str) -> dict:
        return self.add(model_change_entry, provider=provider, model_id=model_id)

    def thinking(self, level: str) -> dict:
        return self.add(thinking_level_change_entry, thinking_level=level)

    def session_info(self, name: str) -> dict:
        return self.add(session_info_entry, name=name)

    def custom(self, custom_type: str, data) -> dict:
        return self.add(custom_entry, custom_type=custom_type, data=data)

    def subagent_result(self, text: str) -> dict:
        return self.add(
            subagent_result_entry,
            batch_id="b1",
            run_id="r1",
            agent="scout",
            status="completed",
            content=[{"type": "text", "text": text}],
        )

    def start(self, provider="anthropic", model="claude-test", level="medium") -> None:
        self.model_change(provider, model)
        self.thinking(level)


# --------------------------------------------------------------------------- generated sessions

PATHS = [
    "src/app.py",
    "src/models.py",
    "README.md",
    "docs/guide.md",
    "tests/test_app.py",
    "setup.cfg",
    "src/ü/ñ.py",
    "src/😀.py",
    "src/！.py",
]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def prose(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def random_turn(b: SessionBuilder, rng: random.Random, *, steps: int, result_words: int) -> None:
    b.user(f"Task: {prose(rng, rng.randint(5, 40))}")
    for _ in range(steps):
        tool = rng.choice(["read", "write", "edit", "bash", "ls", "grep", "read"])
        path = rng.choice(PATHS)
        if tool == "read":
            args = {"path": path} if rng.random() < 0.8 else {"path": path, "offset": rng.randint(1, 50), "limit": 100}
        elif tool == "write":
            args = {"path": path, "content": prose(rng, rng.randint(5, 60))}
        elif tool == "edit":
            args = {"path": path, "edits": [{"oldText": prose(rng, 3), "newText": prose(rng, 6)}]}
        elif tool == "bash":
            args = {"command": f"python -m pytest -q {path}", "timeout": 60}
        elif tool == "ls":
            args = {"path": "src"}
        else:
            args = {"pattern": rng.choice(WORDS), "path": "src", "glob": "*.py"}
        result = prose(rng, rng.randint(1, result_words))
        b.step(
            tool,
            args,
            result,
            text=prose(rng, 8) if rng.random() < 0.3 else None,
            thinking=prose(rng, 15) if rng.random() < 0.3 else None,
            is_error=rng.random() < 0.1,
        )
    b.say(prose(rng, rng.randint(5, 30)))


def tool_heavy(tag: int, turns: int = 24, seed: int = 1) -> SessionBuilder:
    rng = random.Random(seed)
    b = SessionBuilder(tag)
    b.start()
    b.session_info("tool heavy")
    for t in range(turns):
        random_turn(b, rng, steps=rng.randint(1, 6), result_words=400)
        if t % 7 == 3:
            b.label(b.leaf, f"turn-{t}")
    return b


def huge_tool_results(tag: int, *, trailing: bool) -> SessionBuilder:
    rng = random.Random(7)
    b = SessionBuilder(tag)
    b.start()
    for _ in range(4):
        random_turn(b, rng, steps=3, result_words=200)
    b.user("Dump the whole log.")
    b.step("bash", {"command": "cat build.log"}, "log line ✓ 🚀\n" * 9000)
    if not trailing:
        b.say("The log is long; the failure is at the end.")
        random_turn(b, rng, steps=2, result_words=100)
    return b


def with_previous_compaction(tag: int, *, from_hook=False, off_path=False, twice=False) -> SessionBuilder:
    rng = random.Random(11)
    b = SessionBuilder(tag)
    b.start()
    for _ in range(6):
        random_turn(b, rng, steps=3, result_words=150)
    kept = b.entries[-9]["id"]
    path = get_path(b.entries, b.leaf)
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=400))
    fields = compaction_result(prep, {r.kind: f"## Goal\nSummary {r.kind} one" for r in compaction_requests(prep)})
    details = {"readFiles": ["notes/from-details.md", "src/app.py"], "modifiedFiles": ["src/legacy.py"]}
    first_kept = "ffffffff" if off_path else (kept if from_hook else fields["firstKeptEntryId"])
    b.compaction(fields["summary"], first_kept, fields["tokensBefore"], details=details, from_hook=from_hook)
    for _ in range(4):
        random_turn(b, rng, steps=3, result_words=150)
    if twice:
        path = get_path(b.entries, b.leaf)
        prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=300))
        fields = compaction_result(prep, {r.kind: f"## Goal\nSummary {r.kind} two" for r in compaction_requests(prep)})
        b.compaction(fields["summary"], fields["firstKeptEntryId"], fields["tokensBefore"], details=fields["details"])
        for _ in range(3):
            random_turn(b, rng, steps=2, result_words=120)
    return b


def mixed_entries(tag: int) -> SessionBuilder:
    """Bash runs, custom messages, branch summaries, settings, labels, custom and
    unknown entry types all on the path, interleaved with turns; turns that start
    with a bash run, a custom message or a branch summary instead of a user message."""
    rng = random.Random(21)
    b = SessionBuilder(tag)
    b.start("openai", "gpt-5.1", "low")
    random_turn(b, rng, steps=2, result_words=80)
    b.bash("git status --short", " M src/app.py\n?? notes.txt")
    b.bash("cat ~/.netrc", "machine example.com password hunter2", exclude=True)
    b.bash("make test", "", exit_code=2)
    b.step("read", {"path": "Makefile"}, prose(rng, 40))
    b.say("The test target fails on a missing fixture.")
    b.bash("sleep 100", "partial", cancelled=True)
    b.bash("seq 100000", "1\n2\n3", truncated=True, full_output_path="/tmp/out.txt")
    b.custom("plan-mode", {"enabled": True})
    b.custom_message("plan-mode", "Plan mode is on: propose a plan first.", display=True, details={"step": 1})
    b.step("ls", {"path": "."}, "src\ndocs\ntests")
    b.say("Plan: 1. fix the fixture 2. rerun")
    random_turn(b, rng, steps=3, result_words=120)
    b.branch_summary(
        "Explored a Rust port; abandoned.", details={"readFiles": ["Cargo.toml"], "modifiedFiles": ["src/lib.rs"]}
    )
    b.step("edit", {"path": "src/lib.rs", "edits": []}, "reverted")
    b.say("Back on the Python version.")
    b.model_change("anthropic", "claude-opus-4-1")
    b.thinking("high")
    b.label(b.leaf, "after-summary")
    random_turn(b, rng, steps=2, result_words=120)
    b.branch_summary("")  # an empty summary: not in the context, but summarized
    b.custom_message(
        "todo",
        [{"type": "text", "text": "Open todos:\n- docs"}, {"type": "image", "data": PNG_1PX, "mimeType": "image/png"}],
        display=False,
    )
    b.subagent_result("scout found 3 files")
    b.label(b.leaf, "before-screenshot")
    b.user(
        [
            {"type": "text", "text": "What is in this screenshot?"},
            {"type": "image", "data": PNG_1PX, "mimeType": "image/png"},
        ]
    )
    b.say("A single pixel.")
    b.session_info("mixed")
    random_turn(b, rng, steps=4, result_words=150)
    b.custom("plan-mode", {"enabled": False})
    b.model_change("anthropic", "claude-sonnet-4-5")
    b.bash("ls", "a\nb")
    b.step("read", {"path": "a"}, prose(rng, 30))
    b.say("Read a.")
    random_turn(b, rng, steps=2, result_words=60)
    return b


def keep_sweep(b: SessionBuilder) -> list[int]:
    """Keep-recent values that put the cut at every message of the path: the token
    sums of every suffix (and one less), so the cut lands on every kind of entry
    and splits turns that start in every possible way."""
    sums, total = set(), 0
    for entry in reversed(b.entries):
        if entry["type"] == "message":
            total += estimate_tokens(entry["message"])
            sums.update((total, max(total - 1, 0)))
    return sorted(sums)


def long_single_turn(tag: int) -> SessionBuilder:
    rng = random.Random(31)
    b = SessionBuilder(tag)
    b.start()
    b.user("Refactor every module and keep the tests green.")
    for i in range(30):
        path = PATHS[i % len(PATHS)]
        b.step("read" if i % 3 else "edit", {"path": path} if i % 3 else {"path": path, "edits": []}, prose(rng, 150))
    b.say("Done.")
    return b


def odd_assistant_messages(tag: int) -> SessionBuilder:
    """Aborted and error replies (no usable usage), thinking-only replies, several
    calls in one message, arguments with integer-like keys, non-BMP text."""
    rng = random.Random(41)
    b = SessionBuilder(tag)
    b.start()
    random_turn(b, rng, steps=2, result_words=100)
    b.user("Try the flaky thing. 🚀 with ✓ and 𝒳")
    c1 = b.tool_call(
        "bash", {"command": "flaky", "2": "second", "10": 10, "b": None, "1": [1, 2.5, {"z": 1, "0": True}]}
    )
    c2 = b.tool_call("read", {"path": "src/😀.py"})
    b.assistant([{"type": "thinking", "thinking": "two at once"}, {"type": "text", "text": "Running both."}, c1, c2])
    b.tool_result(c1, "exit 1 — ✗ " + "𝒳" * 1500, is_error=True)
    b.tool_result(c2, "x" * 1999 + "😀" + "tail")
    b.assistant([{"type": "thinking", "thinking": "hmm"}], stop_reason="aborted")
    b.user("Go on.")
    b.assistant([], stop_reason="error", usage=False)
    b.user("Retry please.")
    b.assistant([{"type": "text", "text": "Retried: fine."}], stop_reason="error")
    return b


def only_tool_results(tag: int) -> SessionBuilder:
    b = SessionBuilder(tag)
    call = {"id": "toolu_x", "name": "read"}
    for i in range(3):
        b.tool_result(call, f"orphan result {i}")
    return b


def tiny(tag: int) -> SessionBuilder:
    b = SessionBuilder(tag)
    b.start()
    b.user("hello")
    return b


def leaf_is_compaction(tag: int) -> SessionBuilder:
    b = tiny(tag)
    first = b.leaf
    b.say("hi")
    b.compaction("## Goal\nhello", first, 12, details={"readFiles": [], "modifiedFiles": []})
    return b


def compaction_then_label(tag: int) -> SessionBuilder:
    """A compaction whose kept id is not on the path, then nothing to cut at."""
    b = tiny(tag)
    b.say("hi")
    b.compaction("## Goal\nhello", "ffffffff", 12)
    b.label(b.entries[0]["id"], "start")
    return b


def branched_tree(tag: int) -> tuple[SessionBuilder, str]:
    """Three branches in one file; the compaction leaf is inside the middle one."""
    rng = random.Random(51)
    b = SessionBuilder(tag)
    b.start()
    for _ in range(3):
        random_turn(b, rng, steps=2, result_words=100)
    fork = b.leaf
    for _ in range(3):
        random_turn(b, rng, steps=3, result_words=100)
    b.branch_from(fork)
    b.branch_summary("Left the first branch.", details={"readFiles": ["a.txt"], "modifiedFiles": []})
    for _ in range(3):
        random_turn(b, rng, steps=3, result_words=100)
    middle_leaf = b.leaf
    b.branch_from(fork)
    for _ in range(2):
        random_turn(b, rng, steps=1, result_words=50)
    return b, middle_leaf


def random_session(tag: int, seed: int) -> SessionBuilder:
    rng = random.Random(seed)
    b = SessionBuilder(tag)
    b.start()
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.6:
            random_turn(b, rng, steps=rng.randint(0, 5), result_words=rng.choice([20, 200, 1200]))
        elif kind < 0.7:
            b.bash("echo hi", prose(rng, rng.randint(0, 50)), exit_code=rng.choice([0, 1, None]))
        elif kind < 0.8:
            b.custom_message("note", prose(rng, 20), display=rng.random() < 0.5)
        elif kind < 0.9:
            b.branch_summary(prose(rng, 30), details={"readFiles": [rng.choice(PATHS)], "modifiedFiles": []})
        else:
            b.thinking(rng.choice(["off", "low", "high"]))
            b.label(b.leaf, "x")
    return b


# Pi's oracle scripts load Pi once per process (about a second). This driver
# runs many jobs in one process, doing exactly what prepare-compaction.mjs does
# for each (test_batch_driver_matches_the_oracle_cli checks that), and Pi's
# branch summarization for "branch" jobs. It imports the oracle's own library
# from the oracle's cache folder, where ``oracle`` installed Pi.
PI_BATCH_DRIVER = r"""
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const home = process.env.PI_ORACLE_HOME_DIR;
const { findParentCycle, openCopy, pi, piCompaction } = await import(pathToFileURL(`${home}/lib/pi.mjs`).href);
const { createSummarizer } = await import(pathToFileURL(`${home}/lib/summarizer.mjs`).href);

async function compaction(job) {
  const settings = {
    ...piCompaction.DEFAULT_COMPACTION_SETTINGS,
    ...(job.keepRecentTokens != null ? { keepRecentTokens: job.keepRecentTokens } : {}),
    ...(job.reserveTokens != null ? { reserveTokens: job.reserveTokens } : {}),
  };
  const thinkingLevel = job.thinking ?? "off";
  const sm = openCopy(job.file, { removeAfterOpen: true });
  if (job.leaf) sm.branch(job.leaf);
  if (sm.getLeafId() && findParentCycle(sm.getEntries(), sm.getLeafId())) {
    throw new Error("parent cycle on the leaf path");
  }
  const pathEntries = sm.getBranch();
  const preparation = piCompaction.prepareCompaction(pathEntries, settings);
  if (!preparation) {
    const last = pathEntries[pathEntries.length - 1];
    return { settings, leafId: sm.getLeafId(), prepared: false,
      reason: last?.type === "compaction" ? "Already compacted" : "Nothing to compact (session too small)" };
  }
  const splitPrefix = preparation.isSplitTurn && preparation.turnPrefixMessages.length > 0;
  const prefixCall = splitPrefix ? (preparation.messagesToSummarize.length > 0 ? 1 : 0) : -1;
  const summarizer = createSummarizer(
    (_t, call) => (call === prefixCall ? "<turn prefix summary from the model>" : "<summary from the model>"),
    { reasoning: true },
  );
  const result = await piCompaction.compact(preparation, summarizer.model, summarizer.apiKey, undefined,
    job.instructions ?? undefined, undefined, thinkingLevel);
  const { readFiles, modifiedFiles } = piCompaction.computeFileLists(preparation.fileOps);
  return {
    settings, thinkingLevel, leafId: sm.getLeafId(), prepared: true,
    preparation: {
      firstKeptEntryId: preparation.firstKeptEntryId, isSplitTurn: preparation.isSplitTurn,
      tokensBefore: preparation.tokensBefore, previousSummary: preparation.previousSummary ?? null,
      fileOps: { readFiles, modifiedFiles },
      messagesToSummarize: preparation.messagesToSummarize, turnPrefixMessages: preparation.turnPrefixMessages,
    },
    requests: summarizer.calls,
    compactionEntry: { summary: result.summary, firstKeptEntryId: result.firstKeptEntryId,
      tokensBefore: result.tokensBefore, details: result.details, fromHook: false },
  };
}

async function branch(job) {
  const sm = openCopy(job.file, { removeAfterOpen: true });
  const { entries, commonAncestorId } = pi.collectEntriesForBranchSummary(sm, job.oldLeaf, job.target);
  const reserveTokens = job.reserveTokens ?? 16384;
  const summarizer = createSummarizer(() => "<branch summary from the model>",
    { contextWindow: job.contextWindow ?? 200000 });
  const budget = (summarizer.model.contextWindow || 128000) - reserveTokens;
  const prepared = piCompaction.prepareBranchEntries(entries, budget);
  const result = await pi.generateBranchSummary(entries, {
    model: summarizer.model, apiKey: summarizer.apiKey, reserveTokens,
    customInstructions: job.customInstructions ?? undefined, replaceInstructions: job.replaceInstructions ?? undefined,
  });
  return {
    entryIds: entries.map((e) => e.id), commonAncestorId, budget,
    messages: prepared.messages, fileOps: piCompaction.computeFileLists(prepared.fileOps),
    requests: summarizer.calls, result,
  };
}

const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const job of jobs) {
  let out;
  try {
    out = job.kind === "branch" ? await branch(job) : await compaction(job);
  } catch (err) {
    out = { error: err instanceof Error ? err.message : String(err) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
"""


def oracle_home() -> Path:
    """The folder where ``pi-oracle/oracle`` installs Pi (its own rule)."""
    if os.environ.get("PI_ORACLE_HOME"):
        return Path(os.environ["PI_ORACLE_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "neta-pi-oracle"


def run_pi_batch(oracle: Path, jobs: list[dict], folder: Path) -> list[dict]:
    """Run ``jobs`` through :data:`PI_BATCH_DRIVER` in one node process.

    One ordinary ``oracle`` call first makes sure Pi is installed and the
    oracle's library is current in its cache folder.
    """
    fixture = FIXTURES / "01-linear.jsonl"
    proc = subprocess.run([str(oracle), "context", str(fixture)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    driver = folder / "pi-batch.mjs"
    driver.write_text(PI_BATCH_DRIVER, encoding="utf-8")
    jobs_file = folder / "jobs.json"
    jobs_file.write_text(dumps(jobs), encoding="utf-8")
    env = {**os.environ, "PI_ORACLE_HOME_DIR": str(oracle_home())}
    proc = subprocess.run(["node", str(driver), str(jobs_file)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(jobs)
    return results


def as_js(value):
    """``value`` as JavaScript would print and read it back (undefined dropped, NaN null)."""
    return loads(dumps(value))
