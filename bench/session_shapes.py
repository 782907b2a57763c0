"""Synthetic sessions for the benchmarks: linear and branchy, ~580 bytes per entry.

Entries are ordinary Pi v3 ``message`` entries (a user turn, an assistant turn
with usage, now and then a tool call and its result), serialized the way the
providers write them. A *linear* session is one chain; a *branchy* one goes
back a few entries every so often and continues from there, as a user who
retries and explores does, so its active path holds about a quarter of the
entries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sessions_tree import entries as E
from sessions_tree import jsonl
from sessions_tree.ids import ms_to_iso

ENTRY_BYTES = 580
SHAPES = ("linear", "branchy")
_WORDS = (
    "session tree leaf branch entry context compaction summary parent child file read edit bash "
    "model token stream delta tool result assistant user request answer check fix write test über café"
).split()


@dataclass
class SyntheticSession:
    header: dict
    lines: list[str]  # entry lines (without "\n"), in file order
    leaf_id: str
    path_length: int

    def text(self) -> str:
        return "".join(line + "\n" for line in [jsonl.dumps(self.header), *self.lines])


def _words(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n_chars]


def _usage() -> dict:
    return {
        "input": 1200,
        "output": 80,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 1280,
        "cost": {"input": 0.0036, "output": 0.0012, "cacheRead": 0, "cacheWrite": 0, "total": 0.0048},
    }


def synthetic_message(rng: random.Random, i: int, ts: int) -> dict:
    """The i-th message of a conversation (user, assistant, sometimes a tool round)."""
    kind = i % 6
    if kind in (0, 3):
        return {"role": "user", "content": [{"type": "text", "text": ""}], "timestamp": ts}
    if kind == 1:
        return {
            "role": "assistant",
            "content": [
                {"type": "text", "text": ""},
                {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"src/m{i % 97}.py"}},
            ],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": _usage(),
            "stopReason": "toolUse",
            "timestamp": ts,
        }
    if kind == 2:
        return {
            "role": "toolResult",
            "toolCallId": f"call_{i - 1}",
            "toolName": "read",
            "content": [{"type": "text", "text": ""}],
            "isError": False,
            "timestamp": ts,
        }
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": ""}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": _usage(),
        "stopReason": "stop",
        "timestamp": ts,
    }


def _fill_to(entry: dict, rng: random.Random, target: int) -> str:
    """Serialize ``entry`` with its first text block padded so the line is ~``target`` bytes."""
    line = jsonl.dumps(entry)
    missing = target - len(line.encode("utf-8"))
    if missing > 0:
        entry["message"]["content"][0]["text"] = _words(rng, missing)
        line = jsonl.dumps(entry)
    return line


def make_session(shape: str, n_entries: int, *, seed: int = 1, session_id: str | None = None) -> SyntheticSession:
    """A session of ``n_entries`` message entries of about ``ENTRY_BYTES`` bytes each."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, not {shape!r}")
    rng = random.Random(seed)
    base_ms = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    header = E.session_header(
        session_id=session_id or f"0194{seed:04x}-0000-7000-8000-{n_entries:012d}",
        timestamp=ms_to_iso(base_ms),
        cwd="/bench/project",
    )
    taken: set[str] = set()
    lines: list[str] = []
    path: list[str] = []  # the current branch, root first
    for i in range(n_entries):
        if shape == "branchy" and i and i % 8 == 0 and len(path) > 7:
            del path[-6:]  # retry from six entries back: a new sibling branch
        while True:
            entry_id = f"{rng.getrandbits(32):08x}"
            if entry_id not in taken:
                break
        taken.add(entry_id)
        ts = base_ms + i * 1000
        entry = E.message_entry(
            id=entry_id,
            parent_id=path[-1] if path else None,
            timestamp=ms_to_iso(ts),
            message=synthetic_message(rng, i, ts),
        )
        lines.append(_fill_to(entry, rng, ENTRY_BYTES))
        path.append(entry_id)
    return SyntheticSession(header=header, lines=lines, leaf_id=path[-1], path_length=len(path))
