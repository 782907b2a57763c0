"""The scripted provider: rule format, matching, reply sequencing, usage, abort, the demo."""

from __future__ import annotations

import json
import threading
import time

import pytest

from runtime.llm import (
    LlmRequest,
    ModelSpec,
    ScriptedRulesError,
    complete,
    load_script,
    stream,
)
from runtime.llm.scripted import DEMO_RULES, NO_MATCH_MESSAGE

PRICES = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}


def model(rules, **options) -> ModelSpec:
    return ModelSpec("scripted", "scripted-test", "scripted", prices=PRICES, options={"rules": rules, **options})


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def tool_result(call: dict, text: str = "ok") -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call["id"],
        "toolName": call["name"],
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 2,
    }


def request(*messages, system: str = "You are a test.", tools=None) -> LlmRequest:
    return LlmRequest(system_prompt=system, messages=list(messages), tools=tools or [])


TOOL_RULES = {
    "chunk_size": 3,
    "rules": [
        {
            "match": "weather",
            "replies": [
                [
                    {"thinking": "Need the forecast.", "signature": "sig-1"},
                    {"text": "Checking."},
                    {"tool_call": {"name": "forecast", "arguments": {"city": "Oslo", "days": 2}, "id": "call_w1"}},
                ],
                "It will rain in Oslo.",
            ],
        },
        {"match": {"regex": r"^count (\d+)$"}, "reply": {"steps": ["counted"], "stop_reason": "length"}},
        {"match": {"contains": "summary", "system": "summarizer"}, "reply": "## Goal\nsummarized"},
    ],
    "default": {"reply": "default answer to {{user}}"},
}


# -- rule matching and sequencing --------------------------------------------------------------


def test_tool_call_then_final_answer_after_the_tool_result():
    first = complete(model(TOOL_RULES), request(user("What's the WEATHER like?")))
    assert first["content"] == [
        {"type": "thinking", "thinking": "Need the forecast.", "thinkingSignature": "sig-1"},
        {"type": "text", "text": "Checking."},
        {"type": "toolCall", "id": "call_w1", "name": "forecast", "arguments": {"city": "Oslo", "days": 2}},
    ]
    assert first["stopReason"] == "toolUse"
    assert list(first) == ["role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp"]
    assert (first["api"], first["provider"], first["model"]) == ("scripted", "scripted", "scripted-test")

    call = first["content"][2]
    second = complete(model(TOOL_RULES), request(user("What's the WEATHER like?"), first, tool_result(call)))
    assert second["content"] == [{"type": "text", "text": "It will rain in Oslo."}]
    assert second["stopReason"] == "stop"
    # Past the end of the list, the last reply repeats.
    third = complete(model(TOOL_RULES), request(user("weather"), first, tool_result(call), second, first, tool_result(call)))
    assert third["content"][0]["text"] == "It will rain in Oslo."


def test_regex_substring_system_and_default_rules():
    assert complete(model(TOOL_RULES), request(user("count 7")))["stopReason"] == "length"
    # A regex is searched as written (anchors and case count).
    assert complete(model(TOOL_RULES), request(user("please count 7")))["content"][0]["text"] == (
        "default answer to please count 7"
    )
    # `system` must match too.
    in_summarizer = complete(model(TOOL_RULES), request(user("write a summary"), system="You are a summarizer."))
    assert in_summarizer["content"][0]["text"] == "## Goal\nsummarized"
    elsewhere = complete(model(TOOL_RULES), request(user("write a summary"), system="You are a coder."))
    assert elsewhere["content"][0]["text"] == "default answer to write a summary"


def test_only_the_last_user_message_counts():
    first = complete(model(TOOL_RULES), request(user("weather")))
    reply = complete(model(TOOL_RULES), request(user("weather"), first, tool_result(first["content"][2]), user("thanks")))
    assert reply["content"][0]["text"] == "default answer to thanks"


def test_no_match_without_default_is_an_error_message():
    rules = {"rules": [{"match": "x", "reply": "y"}]}
    message = complete(model(rules), request(user("nothing")))
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == NO_MATCH_MESSAGE
    assert message["content"] == []


def test_reply_error_and_stop_reason_override():
    rules = {
        "rules": [
            {"match": "overflow", "reply": {"error": "prompt is too long: 300000 tokens > 200000 maximum"}},
            {"match": "half", "reply": {"steps": ["partial te", "xt"], "error": "Overloaded"}},
        ]
    }
    overflow = complete(model(rules), request(user("overflow")))
    assert overflow["stopReason"] == "error"
    assert overflow["errorMessage"] == "prompt is too long: 300000 tokens > 200000 maximum"
    half = complete(model(rules), request(user("half")))
    assert half["stopReason"] == "error"
    assert [b["text"] for b in half["content"]] == ["partial te", "xt"]


# -- streaming events --------------------------------------------------------------------------


def test_event_sequence_and_chunking():
    events = list(stream(model(TOOL_RULES), request(user("weather"))))
    types = [e.type for e in events]
    assert types[0] == "start"
    assert types[-1] == "done" and types.count("done") + types.count("error") == 1
    # thinking in 3-character chunks, then the text, then the tool call's JSON.
    thinking = [e.delta for e in events if e.type == "thinking_delta"]
    assert thinking == ["Nee", "d t", "he ", "for", "eca", "st."]
    tool_json = "".join(e.delta for e in events if e.type == "toolcall_delta")
    assert json.loads(tool_json) == {"city": "Oslo", "days": 2}
    assert types.index("thinking_end") < types.index("text_start") < types.index("toolcall_start")
    assert all(e.partial is events[-1].message for e in events)
    assert [e.content_index for e in events if e.type.endswith("_start") and e.type != "start"] == [0, 1, 2]


def test_tool_arguments_are_parsed_while_streaming():
    seen = []
    for event in stream(model(TOOL_RULES), request(user("weather"))):
        if event.type == "toolcall_delta":
            seen.append(dict(event.partial["content"][event.content_index]["arguments"]))
    assert seen[0] == {}
    assert {"city": "Oslo"} in seen  # a prefix closed off while the rest is still arriving
    assert seen[-1] == {"city": "Oslo", "days": 2}


def test_usage_is_computed_from_lengths_and_priced():
    message = complete(model(TOOL_RULES), request(user("weather")))
    usage = message["usage"]
    output_chars = len("Need the forecast.") + len("Checking.") + len("forecast") + len('{"city":"Oslo","days":2}')
    assert usage["output"] == -(-output_chars // 4)
    assert usage["input"] > 0
    assert usage["totalTokens"] == usage["input"] + usage["output"]
    assert usage["cost"]["input"] == (3 / 1000000) * usage["input"]
    assert usage["cost"]["output"] == (15 / 1000000) * usage["output"]
    assert usage["cost"]["total"] == pytest.approx(usage["cost"]["input"] + usage["cost"]["output"])
    longer = complete(model(TOOL_RULES), request(user("weather " + "x" * 400)))
    assert longer["usage"]["input"] == usage["input"] + 100


def test_explicit_usage_in_a_reply():
    rules = {"default": {"reply": {"steps": ["hi"], "usage": {"input": 1000, "output": 7, "cacheRead": 500}}}}
    usage = complete(model(rules), request(user("x")))["usage"]
    assert {k: usage[k] for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")} == {
        "input": 1000,
        "output": 7,
        "cacheRead": 500,
        "cacheWrite": 0,
        "totalTokens": 1507,
    }
    assert usage["cost"]["cacheRead"] == (0.3 / 1000000) * 500


def test_cancel_during_a_delay_keeps_what_was_streamed():
    rules = {"default": {"reply": [{"text": "abcdefghij", "chunk_size": 2, "delay_ms": 40}]}}
    cancel = threading.Event()
    events = []
    for event in stream(model(rules), request(user("x")), cancel=cancel):
        events.append(event)
        if event.type == "text_delta" and event.partial["content"][0]["text"] == "abcd":
            cancel.set()
    final = events[-1]
    assert final.type == "error"
    assert [e.type for e in events].count("error") == 1
    assert final.message["stopReason"] == "aborted"
    assert final.message["errorMessage"] == "Request was aborted"
    assert final.message["content"] == [{"type": "text", "text": "abcd"}]


def test_cancel_set_before_the_call():
    cancel = threading.Event()
    cancel.set()
    events = list(stream(model(TOOL_RULES), request(user("weather")), cancel=cancel))
    assert [e.type for e in events] == ["error"]
    assert events[0].message["stopReason"] == "aborted"


def test_a_pause_until_a_file_ends_when_the_file_appears_or_at_its_length(tmp_path):
    release = tmp_path / "release"
    rules = {"default": {"reply": [{"text": "waiting"}, {"pause_ms": 60000, "until_file": str(release)}, {"text": " done"}]}}
    timer = threading.Timer(0.3, release.touch)
    timer.start()
    started = time.monotonic()
    assert complete(model(rules), request(user("x")))["content"] == [{"type": "text", "text": "waiting"}, {"type": "text", "text": " done"}]
    assert 0.3 <= time.monotonic() - started < 5  # ended by the file, not by the 60 s
    timer.join()
    release.unlink()
    short = {"default": {"reply": [{"pause_ms": 200, "until_file": str(release)}, {"text": "on time"}]}}
    started = time.monotonic()
    assert complete(model(short), request(user("x")))["content"][0]["text"] == "on time"  # no file: the pause's length
    assert time.monotonic() - started >= 0.2
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    events = list(stream(model(rules), request(user("x")), cancel=cancel))
    assert events[-1].message["stopReason"] == "aborted"  # cancel works while it waits


def test_options_override_delay_and_chunk_size():
    rules = {"delay_ms": 5000, "default": {"reply": "hello world"}}
    events = list(stream(model(rules, delay_ms=0, chunk_size=0), request(user("x"))))
    assert [e.delta for e in events if e.type == "text_delta"] == ["hello world"]


# -- rule files and validation -----------------------------------------------------------------


def test_yaml_and_json_files(tmp_path):
    yaml_file = tmp_path / "rules.yaml"
    yaml_file.write_text('rules:\n  - match: ping\n    reply: "pong"\n', encoding="utf-8")
    json_file = tmp_path / "rules.json"
    json_file.write_text(json.dumps({"default": {"reply": ["pong (json)"]}}), encoding="utf-8")
    assert complete(model(str(yaml_file)), request(user("ping?")))["content"][0]["text"] == "pong"
    assert complete(model(str(json_file)), request(user("ping?")))["content"][0]["text"] == "pong (json)"
    # An edited file is reloaded.
    yaml_file.write_text('rules:\n  - match: ping\n    reply: "PONG, edited"\n', encoding="utf-8")
    assert complete(model(str(yaml_file)), request(user("ping?")))["content"][0]["text"] == "PONG, edited"


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ([], "give a mapping or a file path"),
        ({}, "give at least one rule or a default"),
        ({"rules": [{"match": "a"}]}, "rules[0]: a rule has exactly one of replies"),
        ({"rules": [{"match": "a", "reply": [{"txt": "x"}]}]}, "rules[0].reply.steps[0]: a step has exactly one of"),
        ({"rules": [{"match": {"regex": "("}, "reply": "x"}]}, "rules[0].match: regex is not a valid regex"),
        ({"rules": [{"match": "a", "reply": {"steps": ["x"], "stop_reason": "done"}}]}, "stop_reason must be one of"),
        ({"rules": [{"match": "a", "reply": [{"tool_call": {"name": "ls", "arguments": "."}}]}]}, "arguments must be a mapping"),
        ({"rules": [{"match": "a", "reply": [{"text": "x", "delay_ms": -1}]}]}, "delay_ms must be a number >= 0"),
        ({"rules": [{"match": "a", "replies": []}]}, "replies must be a non-empty list"),
        ({"default": {"reply": "x"}, "colour": 1}, "unknown key(s) 'colour'"),
        ({"default": {"reply": [{"pause_ms": 5, "until_file": 3}]}}, "until_file must be a string"),
    ],
)
def test_invalid_rules_are_reported_with_their_place(rules, problem):
    with pytest.raises(ScriptedRulesError) as caught:
        load_script(rules)
    assert problem in str(caught.value)
    # Through stream() the same problem becomes an error message, never an exception.
    message = complete(model(rules), request(user("a")))
    assert message["stopReason"] == "error"
    assert problem in message["errorMessage"]


def test_a_broken_or_missing_file_is_an_error_message(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [unclosed\n", encoding="utf-8")
    message = complete(model(str(broken)), request(user("x")))
    assert message["stopReason"] == "error" and "cannot parse" in message["errorMessage"]
    listed = tmp_path / "list.yaml"
    listed.write_text("- match: a\n", encoding="utf-8")
    message = complete(model(str(listed)), request(user("x")))
    assert message["stopReason"] == "error" and "the top level is a mapping" in message["errorMessage"]
    missing = complete(model(str(tmp_path / "nope.yaml")), request(user("x")))
    assert missing["stopReason"] == "error" and "nope.yaml" in missing["errorMessage"]


def test_the_documented_example_is_valid():
    import yaml

    from tests.support.services import REPO

    doc = (REPO / "docs" / "llm.md").read_text(encoding="utf-8")
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    rules = yaml.safe_load(example)
    script = load_script(rules)
    assert len(script.rules) == 3 and script.default is not None
    first = complete(model(rules, delay_ms=0), request(user("weather in Oslo?")))
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "toolCall"]
    overflow = complete(model(rules), request(user("overflow")))
    assert overflow["errorMessage"].startswith("prompt is too long")
    plan = complete(model(rules, delay_ms=0), request(user("/plan it"), system="You are a Planner."))
    assert plan["content"] == [{"type": "text", "text": "Plan:"}, {"type": "text", "text": " done"}]
    assert plan["stopReason"] == "length" and plan["usage"]["input"] == 1000


# -- the demo ----------------------------------------------------------------------------------


def test_demo_shows_thinking_a_tool_call_and_markdown():
    demo = ModelSpec("scripted", "demo", "scripted", prices=PRICES, options={"rules": "scripted_demo.yaml", "delay_ms": 0})
    tools = [{"name": "ls", "description": "List a directory", "parameters": {"type": "object", "properties": {}}}]
    first = complete(demo, request(user("What is in my project?"), tools=tools))
    kinds = [b["type"] for b in first["content"]]
    assert kinds == ["thinking", "text", "toolCall"]
    assert "What is in my project?" in first["content"][0]["thinking"]
    assert first["content"][2]["name"] == "ls" and first["content"][2]["arguments"] == {"path": "."}
    assert first["stopReason"] == "toolUse"
    assert first["usage"]["cost"]["total"] > 0

    second = complete(demo, request(user("What is in my project?"), first, tool_result(first["content"][2], "a.txt\n"), tools=tools))
    text = second["content"][0]["text"]
    assert second["stopReason"] == "stop"
    assert any(line.startswith("## ") for line in text.splitlines())  # a heading
    assert any(line.lstrip().startswith(("1. ", "- ")) for line in text.splitlines())  # a list
    assert "```python" in text and text.count("```") == 2  # a code block
    # The default ModelSpec options (no rules) use the same demo file.
    assert load_script(None) is load_script(DEMO_RULES)


class _FakeTime:
    """A clock the schedule reads and a sleep that moves it (plus a given lateness: the
    interpreter busy with other threads when the stream's thread should wake)."""

    def __init__(self, late: float = 0.0):
        self.now, self.late, self.sleeps = 100.0, late, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds + self.late
        return False


def test_the_schedule_keeps_the_stream_s_pace_however_late_its_thread_wakes():
    from runtime.llm.scripted import PACE_SECONDS, _Schedule

    for late in (0.0, 0.004, 0.02):
        fake = _FakeTime(late)
        schedule = _Schedule(None, clock=fake)
        schedule._sleep = fake.sleep
        for _ in range(100):  # a 1.2 s stream: 100 deltas, 12 ms apart
            assert schedule.wait(0.012) is False
        # Waking late does not add up: the stream ends on time (within one wake-up's lateness).
        assert 100 + 1.2 <= fake.now <= 100 + 1.2 + PACE_SECONDS + late + 1e-9
        # It woke at most every PACE_SECONDS, sending the deltas due by then together.
        assert all(s >= PACE_SECONDS - 1e-9 for s in fake.sleeps)
        assert len(fake.sleeps) <= round(1.2 / PACE_SECONDS) + 1  # 100 wake-ups before


def test_the_schedule_sleeps_out_long_delays_and_pauses_move_it():
    from runtime.llm.scripted import _Schedule

    fake = _FakeTime()
    schedule = _Schedule(None, clock=fake)
    schedule._sleep = fake.sleep
    schedule.wait(0.2)  # a delay longer than the pace is slept as it is
    assert fake.sleeps == [0.2]
    schedule.pause(0.5)
    fake.now += 1.0  # the thread does something else for a second
    schedule.wait(0.0)  # no delay: no sleep
    schedule.wait(0.2)  # behind its schedule: the delta goes at once
    assert fake.sleeps == [0.2, 0.5]
    schedule.wait(0.2)
    assert fake.sleeps[-1] >= 0.2 - 1e-9  # caught up: on the clock again


def test_a_paced_stream_sends_every_delta_in_order():
    """At the pace of the demo file (12 ms a delta) several deltas may leave together:
    every one is still there, in order, and makes the same message."""
    events = list(stream(model(TOOL_RULES, delay_ms=12), request(user("weather")), cancel=threading.Event()))
    thinking = [e.delta for e in events if e.type == "thinking_delta"]
    assert thinking == ["Nee", "d t", "he ", "for", "eca", "st."]
    assert [e.type for e in events][-1] == "done"


def test_the_reported_input_counts_the_tools_json_also_when_remembered():
    """The scripted model counts the tools' JSON in its usage (four characters a token);
    the length is remembered per tool list, and a changed description or schema counts anew."""
    rules = {"version": 1, "rules": [], "default": {"reply": [{"text": "ok"}]}}
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [{"name": "ls", "description": "List a directory.", "parameters": schema}]

    def input_tokens(tools):
        final = complete(model(rules), LlmRequest(system_prompt="", messages=[user("x")], tools=tools))
        return final["usage"]["input"]

    bare = input_tokens([])
    first = input_tokens(tools)
    assert first - bare == pytest.approx(len(json.dumps(tools, ensure_ascii=False)) / 4, abs=1)
    assert input_tokens([dict(t) for t in tools]) == first  # a new list of the same tools
    longer = [{**tools[0], "description": "List a directory, with sizes, in a long and detailed way."}]
    assert input_tokens(longer) > first
    wider = [{**tools[0], "parameters": {**schema, "required": ["path"]}}]
    assert input_tokens(wider) > first
