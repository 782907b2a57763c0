"""Neta's compaction preparation against Pi's own (``pi-oracle prepare-compaction``).

Sessions are generated here (entry builders + ``jsonl.dumps``, written as real
files), then Pi's ``prepareCompaction``/``compact`` run on each file through the
oracle and Neta's :mod:`sessions_tree.compaction` on the same file. Everything
must be equal: the preparation (cut point, split turn, tokens, previous summary,
file lists, the exact messages of both ranges), every summarizer request (system
prompt, user text, max tokens, reasoning) and the compaction entry built from
Pi's replies. All oracle processes start at once (module fixture), so the file
runs in about the time of a few sequential calls.

:class:`SessionBuilder` and the batch driver live in ``pi_sessions.py`` (the branch-summary
oracle tests use them too).
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sessions_tree.compaction import (
    CompactionSettings,
    compaction_blocked_reason,
    compaction_requests,
    compaction_result,
    prepare_compaction,
    summary_reasoning,
)
from sessions_tree.jsonl import loads, parse_session_text
from sessions_tree.path import get_path
from tests.sessions_tree.pi_sessions import (
    SessionBuilder,
    as_js,
    branched_tree,
    compaction_then_label,
    huge_tool_results,
    keep_sweep,
    leaf_is_compaction,
    long_single_turn,
    mixed_entries,
    odd_assistant_messages,
    only_tool_results,
    random_session,
    run_pi_batch,
    tiny,
    tool_heavy,
    with_previous_compaction,
)


@dataclass
class Case:
    name: str
    builder: SessionBuilder
    leaf: str | None = None
    keep: int | None = None
    reserve: int | None = None
    thinking: str | None = None
    instructions: str | None = None
    file: Path | None = field(default=None, repr=False)

    def settings(self) -> CompactionSettings:
        kw = {}
        if self.keep is not None:
            kw["keep_recent_tokens"] = self.keep
        if self.reserve is not None:
            kw["reserve_tokens"] = self.reserve
        return CompactionSettings(**kw)

    def oracle_args(self) -> list[str]:
        args = [str(self.file)] + ([self.leaf] if self.leaf else [])
        if self.keep is not None:
            args += ["--keep-recent-tokens", str(self.keep)]
        if self.reserve is not None:
            args += ["--reserve-tokens", str(self.reserve)]
        if self.thinking is not None:
            args += ["--thinking", self.thinking]
        if self.instructions is not None:
            args += ["--instructions", self.instructions]
        return args


def build_cases() -> list[Case]:
    heavy = tool_heavy(1)
    tree, middle_leaf = branched_tree(20)
    cases = [
        Case("tool-heavy-defaults", heavy),
        Case("tool-heavy-keep-2000-reserve-4096", heavy, keep=2000, reserve=4096),
        Case("tool-heavy-keep-300", heavy, keep=300),
        Case("tool-heavy-keep-0", heavy, keep=0),
        Case("tool-heavy-keep-huge", heavy, keep=10_000_000),
        Case(
            "tool-heavy-instructions-thinking",
            heavy,
            keep=5000,
            thinking="medium",
            instructions="Focus on the tests and the 😀 file.",
        ),
        Case("tool-heavy-thinking-off", heavy, keep=5000, thinking="off"),
        Case("huge-trailing-tool-result", huge_tool_results(2, trailing=True), keep=3000),
        Case("huge-tool-result-in-middle", huge_tool_results(3, trailing=False), keep=3000, reserve=1000),
        Case("previous-compaction", with_previous_compaction(4), keep=800),
        Case("previous-compaction-from-hook", with_previous_compaction(5, from_hook=True), keep=800),
        Case("previous-compaction-off-path-kept-id", with_previous_compaction(6, off_path=True), keep=800),
        Case(
            "two-previous-compactions",
            with_previous_compaction(7, twice=True),
            keep=200,
            thinking="high",
            instructions="Keep it short.",
        ),
        Case("long-single-turn-split", long_single_turn(9), keep=500, thinking="low"),
        Case("odd-assistant-messages", odd_assistant_messages(10), keep=100),
        Case("odd-assistant-messages-keep-1", odd_assistant_messages(10), keep=1),
        Case("only-tool-results", only_tool_results(11)),
        Case("tiny-session", tiny(12)),
        Case("leaf-is-compaction", leaf_is_compaction(13)),
        Case("off-path-compaction-then-label", compaction_then_label(15)),
        Case("branched-tree-inner-leaf", tree, leaf=middle_leaf, keep=700),
        Case("branched-tree-file-leaf", tree, keep=100),
    ]
    mixed = mixed_entries(8)
    cases += [Case(f"mixed-entries-keep-{keep}", mixed, keep=keep) for keep in keep_sweep(mixed)]
    compacted = with_previous_compaction(14)
    cases += [Case(f"previous-compaction-keep-{keep}", compacted, keep=keep) for keep in keep_sweep(compacted)]
    for seed in range(6):
        rng = random.Random(1000 + seed)
        cases.append(Case(f"random-{seed}", random_session(30 + seed, seed), keep=rng.choice([50, 300, 1000, 4000])))
    return cases


CASES = build_cases()


def compaction_job(case: Case) -> dict:
    return {
        "kind": "compaction",
        "file": str(case.file),
        "leaf": case.leaf,
        "keepRecentTokens": case.keep,
        "reserveTokens": case.reserve,
        "thinking": case.thinking,
        "instructions": case.instructions,
    }


@pytest.fixture(scope="module")
def pi_results(oracle, tmp_path_factory) -> dict:
    """Pi's prepare-compaction output for every case (one node process)."""
    folder = tmp_path_factory.mktemp("compaction-oracle")
    written: dict[int, Path] = {}
    for i, case in enumerate(CASES):
        key = id(case.builder)
        if key not in written:
            written[key] = case.builder.write(folder / f"case-{i}.jsonl")
        case.file = written[key]
    results = run_pi_batch(oracle, [compaction_job(c) for c in CASES], folder)
    for case, result in zip(CASES, results, strict=True):
        assert "error" not in result, f"{case.name}: {result['error']}"
    return {case.name: result for case, result in zip(CASES, results, strict=True)}


def neta_view(case: Case) -> dict:
    """Neta's answer for a case, in the shape prepare-compaction.mjs prints."""
    parsed = parse_session_text(case.file.read_text(encoding="utf-8"))
    leaf = case.leaf or parsed.entries[-1]["id"]
    path = get_path(parsed.entries, leaf)
    settings = case.settings()
    prep = prepare_compaction(path, settings)
    if prep is None:
        return {"prepared": False, "reason": compaction_blocked_reason(path, settings)}
    requests = compaction_requests(
        prep, custom_instructions=case.instructions, reasoning=summary_reasoning(True, case.thinking or "off")
    )
    read_files, modified_files = prep.file_ops.file_lists()
    return {
        "prepared": True,
        "preparation": {
            "firstKeptEntryId": prep.first_kept_entry_id,
            "isSplitTurn": prep.is_split_turn,
            "tokensBefore": prep.tokens_before,
            "previousSummary": prep.previous_summary,
            "fileOps": {"readFiles": read_files, "modifiedFiles": modified_files},
            "messagesToSummarize": as_js(prep.messages_to_summarize),
            "turnPrefixMessages": as_js(prep.turn_prefix_messages),
        },
        "requests": requests,
        "prep": prep,
    }


@pytest.mark.oracle
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preparation_requests_and_entry_equal_pis(case, pi_results):
    pi = pi_results[case.name]
    neta = neta_view(case)
    assert neta["prepared"] == pi["prepared"]
    if not pi["prepared"]:
        assert neta["reason"] == pi["reason"]
        return
    assert neta["preparation"] == pi["preparation"]
    assert [r.to_pi() for r in neta["requests"]] == [
        {k: v for k, v in c.items() if k != "reply"} for c in pi["requests"]
    ]
    replies = {r.kind: c["reply"] for r, c in zip(neta["requests"], pi["requests"], strict=True)}
    entry = dict(pi["compactionEntry"])
    assert entry.pop("fromHook") is False
    assert compaction_result(neta["prep"], replies) == entry


@pytest.mark.oracle
def test_the_cases_cover_what_they_claim(pi_results):
    """Guard against a generator change that silently stops exercising a rule."""
    prepared = {name: r for name, r in pi_results.items() if r["prepared"]}
    assert pi_results["leaf-is-compaction"] == {
        **pi_results["leaf-is-compaction"],
        "prepared": False,
        "reason": "Already compacted",
    }
    split = {n for n, r in prepared.items() if r["preparation"]["isSplitTurn"]}
    assert {"long-single-turn-split", "tool-heavy-keep-300"} <= split
    # A split turn that starts the summarized range: history is "No prior history."
    assert prepared["long-single-turn-split"]["preparation"]["messagesToSummarize"] == []
    assert (
        "No prior history.\n\n---\n\n**Turn Context (split turn):**"
        in prepared["long-single-turn-split"]["compactionEntry"]["summary"]
    )
    assert all(r["preparation"]["previousSummary"] for n, r in prepared.items() if "previous-compaction" in n)
    assert "reasoning" in prepared["tool-heavy-instructions-thinking"]["requests"][0]
    assert (
        "Additional focus: Focus on the tests"
        in prepared["tool-heavy-instructions-thinking"]["requests"][0]["userText"]
    )
    assert any(
        "more characters truncated]" in r["userText"] for r in prepared["huge-tool-result-in-middle"]["requests"]
    )
    # A huge trailing tool result: no cut point at or after it, so Pi keeps (almost) everything.
    assert prepared["huge-trailing-tool-result"]["preparation"]["messagesToSummarize"] == []
    # A small session still compacts: Pi keeps the only message and summarizes nothing.
    assert prepared["tiny-session"]["requests"][0]["userText"].startswith("<conversation>\n\n</conversation>\n\n")
    only = prepared["only-tool-results"]["preparation"]
    assert (only["isSplitTurn"], only["messagesToSummarize"]) == (False, [])
    mixed = {n: r["preparation"] for n, r in prepared.items() if n.startswith("mixed-entries-")}
    prefix_starts = {p["turnPrefixMessages"][0]["role"] for p in mixed.values() if p["turnPrefixMessages"]}
    assert {"user", "bashExecution", "custom", "branchSummary"} <= prefix_starts
    assert any(p["isSplitTurn"] and not p["turnPrefixMessages"] for p in mixed.values())  # the cut starts its turn
    builder = next(c.builder for c in CASES if c.name.startswith("mixed-entries-"))
    types = {e["id"]: e["type"] for e in builder.entries}
    cut_types = {types[p["firstKeptEntryId"]] for p in mixed.values()}
    assert {"message", "branch_summary", "custom", "model_change", "session_info"} <= cut_types  # moved back
    # The cut never moves back over a compaction: it can sit right after one.
    compacted = next(c.builder for c in CASES if c.name.startswith("previous-compaction-keep-"))
    after_compaction = {e["id"] for p, e in zip(compacted.entries, compacted.entries[1:]) if p["type"] == "compaction"}
    assert any(
        r["preparation"]["firstKeptEntryId"] in after_compaction
        for n, r in prepared.items()
        if n.startswith("previous-compaction-keep-")
    )
    roles = {m["role"] for r in prepared.values() for m in r["preparation"]["messagesToSummarize"]}
    assert {"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary"} <= roles, roles


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["two-previous-compactions", "long-single-turn-split"])
def test_batch_driver_matches_the_oracle_cli(name, oracle, pi_results):
    """The batch driver prints what ``oracle prepare-compaction`` prints."""
    case = next(c for c in CASES if c.name == name)
    proc = subprocess.run(
        [str(oracle), "prepare-compaction", *case.oracle_args()], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert loads(proc.stdout) == pi_results[name]
