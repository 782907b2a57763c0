"""Pi's buildSessionContext, convertToLlm and token estimates (format doc §8-§10.2)."""

from __future__ import annotations

import json
import random
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_tree import entries as E
from sessions_tree.context import (
    LAST,
    Prefix,
    build_session_context,
    context_from_path,
    convert_to_llm,
    estimate_context_tokens,
    estimate_context_usage,
    estimate_tokens,
    extend_context,
    js_length,
)
from sessions_tree.jsonl import dumps
from sessions_tree.path import CycleError, get_path

T0 = "2025-06-02T09:14:05.120Z"
T0_MS = 1748855645120


def user(text, ts=1):
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant(text, provider="anthropic", model="claude", stop="stop", usage=None):
    message = {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "anthropic-messages"}
    if provider is not None:
        message["provider"] = provider
    if model is not None:
        message["model"] = model
    message["usage"] = usage or {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
    message["stopReason"] = stop
    message["timestamp"] = 2
    return message


class Chain:
    """Builds a chain of entries, each the child of the previous (or of ``parent``)."""

    def __init__(self):
        self.entries: list[dict] = []
        self.leaf = None
        self.n = 0

    def add(self, builder, parent="leaf", **fields):
        self.n += 1
        eid = f"e{self.n:02d}"
        entry = builder(id=eid, parent_id=self.leaf if parent == "leaf" else parent, timestamp=T0, **fields)
        self.entries.append(entry)
        self.leaf = eid
        return entry

    def msg(self, message, **kw):
        return self.add(E.message_entry, message=message, **kw)


def test_plain_path_emits_messages_settings_and_sources():
    c = Chain()
    c.add(E.model_change_entry, provider="openai", model_id="gpt-5")
    c.add(E.thinking_level_change_entry, thinking_level="high")
    u = c.msg(user("hi"))
    a = c.msg(assistant("hello"))
    c.add(E.label_entry, target_id="e03", label="x")
    c.add(E.custom_entry, custom_type="ext", data={"k": 1})
    c.add(E.session_info_entry, name="n")
    c.add(E.subagent_result_entry, batch_id="b", run_id="r", agent="a", status="completed", content=[])
    cm = c.add(E.custom_message_entry, custom_type="note", content="remember", display=False, details={"d": 1})
    c.add(E.branch_summary_entry, from_id="e01", summary="")  # empty: no message
    bs = c.add(E.branch_summary_entry, from_id="root", summary="went elsewhere")
    ctx = build_session_context(c.entries)
    assert ctx.messages[0] is u["message"] and ctx.messages[1] is a["message"]  # the stored dicts
    assert ctx.messages[2] == {"role": "custom", "customType": "note", "content": "remember", "display": False,
                               "details": {"d": 1}, "timestamp": T0_MS}
    assert list(ctx.messages[3]) == ["role", "summary", "fromId", "timestamp"]
    assert ctx.messages[3]["fromId"] == "root" and ctx.messages[3]["timestamp"] == T0_MS
    assert ctx.source_entry_ids == [u["id"], a["id"], cm["id"], bs["id"]]
    assert ctx.thinking_level == "high"
    assert ctx.model == {"provider": "anthropic", "modelId": "claude"}  # the assistant message decides


def test_model_from_assistant_without_fields_is_empty_and_aborted_counts():
    c = Chain()
    c.add(E.model_change_entry, provider="openai", model_id="gpt-5")
    c.msg(assistant("x", provider=None, model=None, stop="aborted"))
    assert build_session_context(c.entries).model == {}


def test_leaf_choices():
    c = Chain()
    c.msg(user("one"))
    c.msg(assistant("two"))
    c.msg(user("branch"), parent="e01")
    assert build_session_context(c.entries, None).messages == []
    assert build_session_context(c.entries, None).thinking_level == "off"
    assert build_session_context(c.entries, None).model is None
    assert build_session_context(c.entries, "e02").source_entry_ids == ["e01", "e02"]
    # Unknown or absent leaf: the last entry (Pi's silent fallback).
    for leaf in (LAST, "nope", ""):
        assert build_session_context(c.entries, leaf).source_entry_ids == ["e01", "e03"]
    assert build_session_context([]).messages == []


def test_compaction_keeps_from_first_kept_then_later_entries():
    c = Chain()
    c.msg(user("old"))              # e01
    c.msg(assistant("old reply"))   # e02
    c.msg(user("kept"))             # e03
    c.add(E.compaction_entry, summary="first", first_kept_entry_id="e02", tokens_before=10)  # e04
    c.msg(assistant("kept reply"))  # e05
    comp = c.add(E.compaction_entry, summary="second", first_kept_entry_id="e03", tokens_before=99, from_hook=False)
    c.msg(user("after"))            # e07
    ctx = build_session_context(c.entries)
    assert ctx.messages[0] == {"role": "compactionSummary", "summary": "second", "tokensBefore": 99, "timestamp": T0_MS}
    assert ctx.source_entry_ids == [comp["id"], "e03", "e05", "e07"]  # older compaction not emitted


def test_compaction_with_first_kept_off_path_keeps_nothing_before_it():
    c = Chain()
    c.msg(user("a"))
    c.msg(user("side"), parent=None)  # e02, another root
    c.msg(user("b"), parent="e01")    # e03
    c.add(E.compaction_entry, summary="s", first_kept_entry_id="e02", tokens_before=1)
    c.msg(user("c"))
    assert build_session_context(c.entries).source_entry_ids == ["e04", "e05"]


def test_cycle_raises():
    entries = [
        E.custom_entry(id="a", parent_id="b", timestamp=T0, custom_type="x"),
        E.custom_entry(id="b", parent_id="a", timestamp=T0, custom_type="x"),
    ]
    with pytest.raises(CycleError):
        build_session_context(entries)


# --------------------------------------------------------------------------- convertToLlm


def test_convert_to_llm_wrappers():
    u = user("plain")
    messages = [
        u,
        {"role": "custom", "customType": "x", "content": "as string", "display": True, "timestamp": 5},
        {"role": "custom", "customType": "x", "content": [{"type": "image", "data": "A", "mimeType": "image/png"}], "timestamp": 6},
        {"role": "branchSummary", "summary": "B", "fromId": "root", "timestamp": 7},
        {"role": "compactionSummary", "summary": "C", "tokensBefore": 1, "timestamp": 8},
        {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": 9},
        {"role": "bashExecution", "command": "x", "output": "o", "exitCode": 0, "cancelled": False, "truncated": False,
         "timestamp": 10, "excludeFromContext": True},
        {"role": "hookMessage", "content": "dropped", "timestamp": 11},
    ]
    out = convert_to_llm(messages)
    assert out[0] is u
    assert out[1] == {"role": "user", "content": [{"type": "text", "text": "as string"}], "timestamp": 5}
    assert out[2]["content"] == messages[2]["content"]
    assert out[3]["content"][0]["text"] == (
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nB</summary>"
    )
    assert out[4]["content"][0]["text"] == (
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\nC\n</summary>"
    )
    assert out[5] == {"role": "user", "content": [{"type": "text", "text": "Ran `ls`\n(no output)"}], "timestamp": 9}
    assert len(out) == 6


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"output": "a\nb", "exitCode": 2}, "Ran `c`\n```\na\nb\n```\n\nCommand exited with code 2"),
        ({"output": "a", "exitCode": None, "cancelled": True}, "Ran `c`\n```\na\n```\n\n(command cancelled)"),
        ({"output": "a", "exitCode": 0, "truncated": True, "fullOutputPath": "/t/o"},
         "Ran `c`\n```\na\n```\n\n[Output truncated. Full output: /t/o]"),
        ({"output": "a", "exitCode": 0, "truncated": True}, "Ran `c`\n```\na\n```"),
    ],
)
def test_bash_execution_text(fields, text):
    message = {"role": "bashExecution", "command": "c", "cancelled": False, "truncated": False, "timestamp": 1, **fields}
    assert convert_to_llm([message])[0]["content"][0]["text"] == text


# --------------------------------------------------------------------------- tokens


def test_js_length_counts_utf16_units():
    assert js_length("abc") == 3 and js_length("é") == 1 and js_length("😀") == 2 and js_length("\ud800") == 1


def test_estimate_tokens_rules():
    assert estimate_tokens(user("abcde")) == 2  # ceil(5/4)
    assert estimate_tokens({"role": "user", "content": "😀😀", "timestamp": 1}) == 1  # 4 units
    call = {"type": "toolCall", "id": "t", "name": "read", "arguments": {"path": "é", "n": 5.0}}
    message = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, call], "timestamp": 1}
    assert estimate_tokens(message) == -(-(3 + 4 + len('{"path":"é","n":5}')) // 4)
    image_result = {"role": "toolResult", "content": [{"type": "text", "text": "ok"}, {"type": "image", "data": "x"}]}
    assert estimate_tokens(image_result) == -(-(2 + 4800) // 4)
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "abcdef"}) == 2
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 9}) == 3
    assert estimate_tokens({"role": "other"}) == 0


def test_estimate_context_tokens_uses_last_valid_usage():
    usage = {"input": 10, "output": 5, "cacheRead": 3, "cacheWrite": 2, "totalTokens": 0}
    messages = [user("x" * 40), assistant("y", usage=usage), user("z" * 8), assistant("w", stop="aborted")]
    result = estimate_context_usage(messages)
    assert (result.usage_tokens, result.last_usage_index) == (20, 1)
    assert result.tokens == 20 + 2 + estimate_tokens(messages[3])
    assert estimate_context_tokens([user("abcd")]) == 1


# --------------------------------------------------------------------------- extend_context


def _random_path(rng: random.Random, n: int) -> list[dict]:
    out: list[dict] = []
    parent = None
    for i in range(n):
        eid = f"p{i:03d}"
        kind = rng.choice(["user", "assistant", "assistant", "thinking", "model", "compaction", "branch", "custom_message", "label", "custom"])
        base = {"id": eid, "parent_id": parent, "timestamp": T0}
        if kind == "user":
            entry = E.message_entry(**base, message=user(f"u{i}"))
        elif kind == "assistant":
            entry = E.message_entry(**base, message=assistant(f"a{i}", provider=rng.choice(["p1", None])))
        elif kind == "thinking":
            entry = E.thinking_level_change_entry(**base, thinking_level=rng.choice(["low", "high"]))
        elif kind == "model":
            entry = E.model_change_entry(**base, provider="x", model_id=f"m{i}")
        elif kind == "compaction":
            targets = [e["id"] for e in out] + ["nope"]
            entry = E.compaction_entry(**base, summary=f"c{i}", first_kept_entry_id=rng.choice(targets), tokens_before=i)
        elif kind == "branch":
            entry = E.branch_summary_entry(**base, from_id="root", summary=rng.choice(["", f"b{i}"]))
        elif kind == "custom_message":
            entry = E.custom_message_entry(**base, custom_type="t", content=f"m{i}", display=True)
        elif kind == "label":
            entry = E.label_entry(**base, target_id=parent or eid, label="l")
        else:
            entry = E.custom_entry(**base, custom_type="t")
        out.append(entry)
        parent = eid
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 40), st.data())
def test_extend_context_equals_full_rebuild(seed, n, data):
    path = _random_path(random.Random(seed), n)
    k = data.draw(st.integers(0, n))
    old = context_from_path(path[:k])
    extended = extend_context(old, path[k:])
    full = context_from_path(path)
    if any(e["type"] == "compaction" for e in path[k:]):
        assert extended is None
    else:
        assert extended == full
        assert all(a is b for a, b in zip(extended.messages, full.messages, strict=True) if "role" in a and a["role"] in ("user", "assistant"))
    # The old context is not changed by extending it.
    assert old == context_from_path(path[:k])


def test_context_from_path_equals_build_over_entries():
    path = _random_path(random.Random(3), 60)
    assert context_from_path(get_path(path, path[-1]["id"])) == build_session_context(path)


# --------------------------------------------------------------------------- against Pi


@pytest.mark.oracle
def test_token_estimates_match_pi(oracle, tmp_path):
    """``tokensBefore`` of Pi's prepareCompaction is estimateContextTokens of the context."""
    rng = random.Random(11)
    texts = ["plain", "é", "😀 wide", "中文字", "\ud800"]

    def text():
        return " ".join(rng.choice(texts) for _ in range(rng.randint(1, 30)))

    c = Chain()
    c.msg(user(text()))
    c.msg({"role": "assistant", "content": [{"type": "thinking", "thinking": text()}, {"type": "text", "text": text()},
          {"type": "toolCall", "id": "t1", "name": "edit", "arguments": {"path": "é.py", "n": 1e-7, "10": [2.0]}}],
           "api": "a", "provider": "p", "model": "m", "usage": {"input": 1}, "stopReason": "aborted", "timestamp": 3})
    c.msg({"role": "toolResult", "toolCallId": "t1", "toolName": "edit",
           "content": [{"type": "text", "text": text()}, {"type": "image", "data": "A", "mimeType": "image/png"}],
           "isError": False, "timestamp": 4})
    c.msg({"role": "bashExecution", "command": text(), "output": text(), "exitCode": 1, "cancelled": False,
           "truncated": False, "timestamp": 5})
    c.add(E.custom_message_entry, custom_type="n", content=[{"type": "text", "text": text()}], display=True)
    c.add(E.branch_summary_entry, from_id="e01", summary=text())
    c.msg(user(text()))
    estimated_only = list(c.entries)
    c.msg(assistant("ok", usage={"input": 100, "output": 20, "cacheRead": 5, "cacheWrite": 1, "totalTokens": 0}))
    c.msg(user(text()))
    c.msg({"role": "custom", "customType": "x", "content": text(), "display": True, "timestamp": 9})
    header = E.session_header(session_id="01970000-0000-7000-8000-000000000001", timestamp=T0, cwd="/w")
    for name, entries in (("estimated", estimated_only), ("usage", c.entries)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(dumps(x) + "\n" for x in [header, *entries]), encoding="utf-8")
        done = subprocess.run([str(oracle), "prepare-compaction", str(path)], capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
        pi = json.loads(done.stdout)["preparation"]["tokensBefore"]
        messages = build_session_context(entries).messages
        assert estimate_context_tokens(messages) == pi
        assert (estimate_context_usage(messages).last_usage_index is None) == (name == "estimated")


def test_prefix_is_a_read_only_list_of_its_own_items():
    shared = Prefix([1, 2, 3])
    longer = shared.extended([4, 5])
    assert list(shared) == [1, 2, 3] and list(longer) == [1, 2, 3, 4, 5]  # the older view keeps its prefix
    assert shared == [1, 2, 3] and [1, 2, 3] == shared and shared == (1, 2, 3) and shared != [1, 2]
    assert len(shared) == 3 and shared[-1] == 3 and shared[0] == 1
    with pytest.raises(IndexError):
        shared[3]  # there is a 4 underneath, but not in this view
    assert shared[1:] == [2, 3] and shared[-2:] == [2, 3] and shared[:10] == [1, 2, 3] and shared[::-1] == [3, 2, 1]
    assert longer[3:] == [4, 5] and shared[5:] == [] and list(reversed(shared)) == [3, 2, 1]
    # Extending an older view copies it: the newer one is not disturbed.
    fork = shared.extended(["x"])
    assert list(fork) == [1, 2, 3, "x"] and list(longer) == [1, 2, 3, 4, 5]
    assert longer.extended([]) is longer


def test_extending_a_context_touches_only_the_new_messages():
    c = Chain()
    entries = [c.msg(user("one")), c.msg(assistant("two"))]
    ctx = context_from_path(entries)
    more = [c.msg(user("three")), c.msg(assistant("four"))]
    grown = extend_context(ctx, more)
    assert [m["content"][0]["text"] for m in ctx.messages] == ["one", "two"]
    assert [m["content"][0]["text"] for m in grown.messages] == ["one", "two", "three", "four"]
    assert grown.messages._items is ctx.messages._items  # shared, not copied
    assert grown == context_from_path(entries + more)
