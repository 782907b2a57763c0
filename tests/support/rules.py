"""The scripted model's rules for tests (plain data: any process may import it)."""

from __future__ import annotations

SUMMARY_SYSTEM = "context summarization assistant"


def rules(*rules_list, default=None) -> dict:
    return {
        "version": 1,
        "chunk_size": 4,
        "delay_ms": 0,
        "rules": list(rules_list),
        "default": default or {"reply": [{"text": "echo: {{user}}"}]},
    }


def summary_rule(text: str = "## Goal\nSummarized.") -> dict:
    return {"match": {"system": SUMMARY_SYSTEM}, "reply": [{"text": text}]}


WRITE_THEN_READ = {
    "match": {"contains": "make a file"},
    "replies": [
        [
            {"thinking": "I will write the file, then read it back."},
            {"tool_call": {"name": "write", "arguments": {"path": "notes/a.txt", "content": "hello ✓\n"}}},
            {"tool_call": {"name": "read", "arguments": {"path": "notes/a.txt"}}},
        ],
        [{"text": "Wrote and read **notes/a.txt**."}],
    ],
}

SLOW_TEXT = " ".join(f"word{i:03d}" for i in range(120))  # 959 characters

# The scripted model's rules for these tests: instant replies, one slow stream
# (for abort and dropped sockets), one tool round, and short summaries.
TEST_RULES = {
    "version": 1,
    "chunk_size": 8,
    "delay_ms": 0,
    "rules": [
        {"match": {"system": "context summarization assistant"}, "reply": "## Goal\nThe branch, summarized."},
        {"match": {"contains": "slowly"}, "reply": {"delay_ms": 4, "chunk_size": 3, "steps": [{"text": SLOW_TEXT}]}},
        {
            "match": {"contains": "use a tool"},
            "replies": [[{"text": "Looking around."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}], "Done looking."],
        },
    ],
    "default": {"reply": "You said: {{user}}"},
}
