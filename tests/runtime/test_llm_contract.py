"""The provider-independent parts: cost, the overflow rule (checked against Pi's own code),
streamed tool-argument parsing, the transcript rules and the stream contract."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.llm import (
    LlmRequest,
    ModelSpec,
    complete,
    compute_cost,
    is_context_overflow,
    stream,
)
from runtime.llm.partial_json import PartialJson, parse_arguments
from runtime.llm.transcript import (
    anthropic_tool_call_id,
    openai_tool_call_id,
    prepare_transcript,
)
from tests.support.services import FIXTURES

# -- cost ---------------------------------------------------------------------------------------


def test_compute_cost_fills_usage_and_returns_the_cost():
    usage = {"input": 1000, "output": 500, "cacheRead": 2000, "cacheWrite": 100, "totalTokens": 3600}
    cost = compute_cost(usage, {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75})
    assert cost is usage["cost"]
    assert list(cost) == ["input", "output", "cacheRead", "cacheWrite", "total"]
    # Pi's arithmetic and order: (price / 1e6) * tokens, so the floats match Pi's.
    assert cost["input"] == (3 / 1000000) * 1000 and cost["output"] == (15 / 1000000) * 500
    assert cost["total"] == cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]


def test_missing_prices_cost_nothing():
    usage = {"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0}
    assert compute_cost(usage, {"input": 1})["total"] == (1 / 1000000) * 10
    assert compute_cost(usage, {})["total"] == 0


# -- overflow -----------------------------------------------------------------------------------


def assistant(stop: str, error: str | None = None, **usage) -> dict:
    message = {
        "role": "assistant",
        "content": [],
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, **usage},
        "stopReason": stop,
    }
    if error is not None:
        message["errorMessage"] = error
    return message


OVERFLOW_CASES = [
    (assistant("error", "400 invalid_request_error: prompt is too long: 213462 tokens > 200000 maximum"), 200000, True),
    (assistant("error", "413 request_too_large: Request exceeds the maximum size"), 200000, True),
    (assistant("error", "400 Your input exceeds the context window of this model."), 128000, True),
    (assistant("error", "This model's maximum context length is 65536 tokens. However, you requested 70000"), 65536, True),
    (assistant("error", "400 status code (no body)"), 128000, True),
    (assistant("error", "model_context_window_exceeded: the request filled the model's context window"), 1, True),
    (assistant("error", "429 rate limit: too many tokens per minute"), 128000, False),
    (assistant("error", "ThrottlingException: Too many tokens, please wait"), 128000, True),
    (assistant("error", "Throttling error: Too many tokens, please wait"), 128000, False),
    (assistant("error", "overloaded_error: Overloaded"), 128000, False),
    (assistant("stop", input=120000, cacheRead=9000), 128000, True),
    (assistant("stop", input=120000, cacheRead=8000), 128000, False),
    (assistant("stop", input=999999), 0, False),
    (assistant("length", input=126800, output=0), 128000, True),
    (assistant("length", input=126700, output=0), 128000, False),
    (assistant("length", input=127000, output=3), 128000, False),
    (assistant("aborted", "prompt is too long"), 128000, False),
]


@pytest.mark.parametrize(("message", "window", "expected"), OVERFLOW_CASES)
def test_context_overflow_rule(message, window, expected):
    assert is_context_overflow(message, window) is expected


def _pi_home() -> Path | None:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    home = Path(os.environ.get("PI_ORACLE_HOME") or Path(cache) / "neta-pi-oracle")
    return home if (home / "node_modules" / "@mariozechner" / "pi-ai").exists() else None


def _pi_node(script: str, payload) -> object:
    home = _pi_home()
    if home is None:
        return None
    result = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=home,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.oracle
def test_overflow_rule_and_cost_match_pi(oracle):
    # Ask pi-ai itself; the oracle installs Pi into its cache on first use.
    if _pi_home() is None:
        subprocess.run([str(oracle), "context", str(FIXTURES / "01-linear.jsonl")], capture_output=True, timeout=300)
    usages = [
        {"input": 1234, "output": 567, "cacheRead": 89012, "cacheWrite": 345},
        {"input": 1, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        {"input": 987654, "output": 32000, "cacheRead": 7, "cacheWrite": 11},
    ]
    prices = [
        {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
        {"input": 0.27, "output": 1.1, "cacheRead": 0.07, "cacheWrite": 0},
        {"input": 1.25, "output": 10, "cacheRead": 0.125, "cacheWrite": 0},
    ]
    script = """
import {isContextOverflow, calculateCost} from "@mariozechner/pi-ai";
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const {overflow, costs} = JSON.parse(input);
  const flags = overflow.map(([message, window]) => isContextOverflow(message, window));
  const priced = costs.map(([usage, cost]) => {
    const u = {...usage, totalTokens: 0, cost: {input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0}};
    return calculateCost({cost}, u);
  });
  process.stdout.write(JSON.stringify({flags, priced}));
});
"""
    pairs = [(u, p) for u in usages for p in prices]
    pi = _pi_node(script, {"overflow": [[m, w] for m, w, _ in OVERFLOW_CASES], "costs": pairs})
    assert pi is not None, "pi-ai is not installed in the oracle cache"
    assert pi["flags"] == [is_context_overflow(m, w) for m, w, _ in OVERFLOW_CASES]
    assert pi["priced"] == [compute_cost(dict(u), p) for u, p in pairs]


# -- streamed tool arguments --------------------------------------------------------------------


def feed_all(text: str, size: int) -> list:
    partial = PartialJson()
    values = []
    for start in range(0, len(text), size):
        partial.feed(text[start : start + size])
        values.append(partial.value())
    return values


def test_partial_arguments_grow_as_they_arrive():
    text = json.dumps({"path": "src/app.py", "content": 'print("hi")\n', "lines": [1, 2, 3], "opts": {"force": True}})
    values = feed_all(text, 1)
    assert values[-1] == json.loads(text)
    assert {"path": "src/app.py"} in values
    assert {"path": "src/app.py", "content": 'print("h'} in values  # an open string value is closed off
    assert all(v is None or isinstance(v, dict) for v in values)


def test_unfinished_escapes_and_keys_are_dropped():
    partial = PartialJson()
    partial.feed('{"a": "x\\')
    assert partial.value() == {"a": "x"}
    partial.feed('u00')
    assert partial.value() == {"a": "x"}
    partial.feed('e9", "ke')
    assert partial.value() == {"a": "xé"}
    partial.feed('y": tr')
    assert partial.value() == {"a": "xé"}
    partial.feed("ue}")
    assert partial.value() == {"a": "xé", "key": True}


def test_parse_arguments_of_broken_json():
    assert parse_arguments("") == {}
    assert parse_arguments('{"a": 1, "b": [1, 2') == {"a": 1, "b": [1, 2]}
    assert parse_arguments("[1, 2]") == {}
    assert parse_arguments("not json") == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.integers(min_value=1, max_value=9), st.booleans())
def test_any_object_streamed_in_any_chunks_parses_back(value, size, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    values = feed_all(text, size)
    assert values[-1] == value
    assert all(v is None or isinstance(v, dict) for v in values)


# -- the transcript sent to a model -------------------------------------------------------------

MODEL = ModelSpec("anthropic", "claude-x", "anthropic")


def own(content, stop="toolUse") -> dict:
    return {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-x",
        "stopReason": stop,
    }


def result(call_id: str) -> dict:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "t", "content": [{"type": "text", "text": "r"}], "isError": False}


def test_incomplete_turns_are_left_out_with_their_results():
    call = {"type": "toolCall", "id": "a1", "name": "t", "arguments": {}}
    messages = [
        {"role": "user", "content": "go"},
        own([call], stop="aborted"),
        result("a1"),
        {"role": "user", "content": "again"},
    ]
    assert [m["role"] for m in prepare_transcript(messages, MODEL)] == ["user", "user"]


def test_foreign_tool_call_ids_are_rewritten_with_their_results():
    foreign = {**own([{"type": "toolCall", "id": "call_1|fc_9+/=", "name": "t", "arguments": {}}]), "provider": "openai", "api": "openai-responses"}
    messages = [{"role": "user", "content": "go"}, foreign, result("call_1|fc_9+/=")]
    out = prepare_transcript(messages, MODEL, normalize_tool_call_id=anthropic_tool_call_id)
    assert out[1]["content"][0]["id"] == "call_1_fc_9___"
    assert out[2]["toolCallId"] == "call_1_fc_9___"
    assert openai_tool_call_id("call_1|" + "x" * 500) == "call_1"
    assert len(openai_tool_call_id("y" * 64)) == 40
    assert messages[1]["content"][0]["id"] == "call_1|fc_9+/="  # the input is not modified


def test_results_missing_at_the_end_are_synthesized():
    messages = [{"role": "user", "content": "go"}, own([{"type": "toolCall", "id": "z", "name": "t", "arguments": {}}])]
    out = prepare_transcript(messages, MODEL)
    assert out[-1]["role"] == "toolResult" and out[-1]["toolCallId"] == "z" and out[-1]["isError"] is True


# -- the stream contract ------------------------------------------------------------------------


def test_unknown_provider_kind_is_an_error_message():
    events = list(stream(ModelSpec("gemini", "g", "google"), LlmRequest("", [], [])))
    assert [e.type for e in events] == ["error"]
    assert "Unknown provider kind 'gemini'" in events[0].message["errorMessage"]


def test_connection_refused_is_retried_then_reported():
    # A port nobody listens on: connection errors are retried (bounded), then reported.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = ModelSpec(
        "openai-compatible",
        "local",
        "vllm",
        base_url=f"http://127.0.0.1:{port}/v1",
        options={"max_retries": 2, "retry_base_delay": 0.01, "connect_timeout": 2},
    )
    message = complete(model, LlmRequest("", [{"role": "user", "content": "hi"}], []))
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith("Connection error:")


def test_invalid_options_are_reported_not_raised():
    model = ModelSpec("openai-compatible", "local", "vllm", base_url="http://127.0.0.1:9/v1", options={"timeout": "soon"})
    message = complete(model, LlmRequest("", [{"role": "user", "content": "hi"}], []))
    assert message["stopReason"] == "error"
    assert "option 'timeout' must be a positive number" in message["errorMessage"]


def test_a_cancel_during_the_retry_wait_aborts():
    model = ModelSpec("openai-compatible", "local", "vllm", base_url="http://127.0.0.1:9/v1", options={"retry_base_delay": 30})
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    message = complete(model, LlmRequest("", [{"role": "user", "content": "hi"}], []), cancel=cancel)
    assert message["stopReason"] == "aborted"
