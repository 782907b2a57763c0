"""The turn loop end to end with the scripted model (the inline backend's code path)."""

from __future__ import annotations

import time

import pytest

from runtime.errors import RuntimeInputError
from runtime.models import AgentRun, RunStatus
from runtime.runs.prompts import run_abort, session_prompt
from sessions_tree.providers import get_provider
from tests.support.rules import WRITE_THEN_READ, rules, summary_rule

pytestmark = pytest.mark.django_db(transaction=True)


def messages(driver):
    return get_provider(driver.agent.session_provider).build_context(driver.session_id).messages


def roles(driver):
    return [m["role"] for m in messages(driver)]


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_a_plain_answer(driver_for, provider):
    driver = driver_for(rules(default={"reply": [{"thinking": "hmm"}, {"text": "Hello **there**"}]}), provider=provider)
    run = driver.prompt("hi")
    assert run.status == RunStatus.COMPLETED, run.error
    msgs = messages(driver)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == [{"type": "text", "text": "hi"}]
    reply = msgs[1]
    assert [b["type"] for b in reply["content"]] == ["thinking", "text"]
    assert reply["content"][1]["text"] == "Hello **there**"
    assert reply["stopReason"] == "stop" and reply["provider"] == "scripted" and reply["model"] == "scripted-test"
    assert reply["usage"]["cost"]["total"] > 0
    assert run.output_tokens == reply["usage"]["output"] and run.cost > 0
    kinds = [e["type"] for _, e in driver.sink.events]
    assert kinds[0] == "run_state" and kinds[1] == "assistant_stream_start"
    assert "assistant_stream_delta" in kinds and "assistant_stream_end" in kinds
    streamed = "".join(e["delta"] for e in driver.sink.of_type("assistant_stream_delta") if e["kind"] == "text")
    assert streamed == "Hello **there**"
    assert driver.sink.of_type("run_state")[-1]["state"] == "completed"
    meta = get_provider(provider).get_session(driver.session_id)
    assert meta.in_flight_entry_id is None


def test_multi_round_tool_use(driver_for, workspace):
    driver = driver_for(rules(WRITE_THEN_READ))
    run = driver.prompt("please make a file")
    assert run.status == RunStatus.COMPLETED, run.error
    assert (workspace / "sessions" / driver.session_id / "notes" / "a.txt").read_text() == "hello ✓\n"  # per session
    msgs = messages(driver)
    assert [m["role"] for m in msgs] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    calls = [b for b in msgs[1]["content"] if b["type"] == "toolCall"]
    assert [m["toolCallId"] for m in msgs[2:4]] == [c["id"] for c in calls]
    assert msgs[2]["isError"] is False and "hello ✓" in msgs[3]["content"][0]["text"]
    assert msgs[1]["stopReason"] == "toolUse" and msgs[4]["stopReason"] == "stop"
    assert run.rounds == 1
    completed = driver.sink.of_type("tool_call_completed")
    assert [c["toolCall"]["name"] for c in completed] == ["write", "read"]
    results = [e for e in driver.sink.of_type("tool_result_streamed") if e.get("final")]
    assert len(results) == 2 and not any(r["isError"] for r in results)


def test_a_tool_the_policy_blocks_gets_an_error_result(driver_for):
    script = rules(
        {
            "match": {"contains": "run bash"},
            "replies": [[{"tool_call": {"name": "bash", "arguments": {"command": "echo hi"}}}], [{"text": "ok"}]],
        }
    )
    driver = driver_for(script, tool_policy={"disabled": ["bash"]})
    run = driver.prompt("run bash please")
    assert run.status == RunStatus.COMPLETED
    result = messages(driver)[2]
    assert result["role"] == "toolResult" and result["isError"] is True
    assert "not available" in result["content"][0]["text"]


def test_abort_during_text(driver_for):
    slow = "word " * 400
    driver = driver_for(rules(default={"reply": [{"text": slow, "delay_ms": 5, "chunk_size": 5}]}))
    thread, holder, run = driver.start("talk a lot")
    wait_for(lambda: driver.sink.of_type("assistant_stream_delta"))
    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    finished = holder[0]
    assert finished.status == RunStatus.ABORTED
    reply = messages(driver)[-1]
    assert reply["stopReason"] == "aborted"
    partial = reply["content"][0]["text"] if reply["content"] else ""
    assert 0 < len(partial) < len(slow)
    assert get_provider("file").get_session(driver.session_id).in_flight_entry_id is None
    # The next turn works and does not replay the aborted reply to the model.
    again = driver.prompt("next")
    assert again.status == RunStatus.COMPLETED


def test_abort_during_a_tool_kills_it_and_closes_the_transcript(driver_for):
    script = rules(
        {
            "match": {"contains": "sleep"},
            "replies": [
                [
                    {"tool_call": {"name": "bash", "arguments": {"command": "sleep 30"}}},
                    {"tool_call": {"name": "read", "arguments": {"path": "x"}}},
                ],
                [{"text": "never"}],
            ],
        }
    )
    driver = driver_for(script)
    thread, holder, run = driver.start("sleep for a while")
    wait_for(lambda: driver.sink.of_type("tool_call_completed") and len(messages(driver)) >= 2)
    time.sleep(0.3)
    started = time.monotonic()
    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    assert time.monotonic() - started < 10
    assert holder[0].status == RunStatus.ABORTED
    msgs = messages(driver)
    assert [m["role"] for m in msgs] == ["user", "assistant", "toolResult", "toolResult"]
    assert all(m["isError"] for m in msgs[2:])
    assert "cancel" in msgs[2]["content"][0]["text"].lower() or "abort" in msgs[2]["content"][0]["text"].lower()


def test_abort_between_rounds(driver_for):
    driver = driver_for(rules(WRITE_THEN_READ))
    original_emit = driver.sink.emit

    def emit(session_id, event):
        original_emit(session_id, event)
        if event["type"] == "tool_result_streamed" and event.get("final") and len(driver.sink.of_type("tool_result_streamed")) >= 2:
            AgentRun.objects.filter(session_id=driver.session_id).update(cancel_requested=True)

    driver.sink.emit = emit
    thread, holder, run = driver.start("make a file")
    thread.join(timeout=20)
    assert holder[0].status == RunStatus.ABORTED
    assert [m["role"] for m in messages(driver)] == ["user", "assistant", "toolResult", "toolResult"]


def test_max_tool_rounds(driver_for):
    loop = {"match": {"contains": "loop"}, "reply": [{"tool_call": {"name": "ls", "arguments": {"path": "."}}}]}
    driver = driver_for(rules(loop), max_tool_rounds=3)
    run = driver.prompt("loop forever")
    assert run.status == RunStatus.FAILED and "3 tool rounds" in run.error
    assert run.rounds == 3
    assert roles(driver) == ["user"] + ["assistant", "toolResult"] * 3


def test_follow_up_is_queued_and_answered(driver_for):
    slow = {"match": {"contains": "first"}, "reply": [{"text": "one " * 50, "delay_ms": 10, "chunk_size": 10}]}
    driver = driver_for(rules(slow))
    thread, holder, run = driver.start("first question")
    wait_for(lambda: driver.sink.of_type("assistant_stream_delta"))
    outcome = session_prompt(actor=None, session_id=driver.session_id, text="second question")
    assert outcome.queued_as == "follow_up" and outcome.run.pk == run.pk
    thread.join(timeout=20)
    assert holder[0].status == RunStatus.COMPLETED
    msgs = messages(driver)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[2]["content"][0]["text"] == "second question"
    assert msgs[3]["content"][0]["text"] == "echo: second question"


def test_steer_is_delivered_after_the_current_tool_call(driver_for):
    script = rules(
        {
            "match": {"contains": "two slow"},
            "replies": [
                [
                    {"tool_call": {"name": "bash", "arguments": {"command": "sleep 1; echo one"}}},
                    {"tool_call": {"name": "bash", "arguments": {"command": "echo two"}}},
                ],
                [{"text": "steered"}],
            ],
        }
    )
    driver = driver_for(script)
    thread, holder, run = driver.start("two slow commands")
    wait_for(lambda: driver.sink.of_type("tool_call_completed"))
    outcome = session_prompt(actor=None, session_id=driver.session_id, text="change of plan", mode="steer")
    assert outcome.queued_as == "steer"
    thread.join(timeout=20)
    assert holder[0].status == RunStatus.COMPLETED, holder[0].error
    msgs = messages(driver)
    assert [m["role"] for m in msgs] == ["user", "assistant", "toolResult", "toolResult", "user", "assistant"]
    assert "one" in msgs[2]["content"][0]["text"] and not msgs[2]["isError"]
    assert msgs[3]["isError"] and "Skipped" in msgs[3]["content"][0]["text"]
    assert msgs[4]["content"][0]["text"] == "change of plan"


def test_model_error_fails_the_run_with_the_message(driver_for):
    driver = driver_for(rules(default={"reply": {"steps": [{"text": "par"}], "error": "upstream exploded"}}))
    run = driver.prompt("anything")
    assert run.status == RunStatus.FAILED and "upstream exploded" in run.error
    reply = messages(driver)[-1]
    assert reply["stopReason"] == "error" and reply["errorMessage"] == "upstream exploded"


def test_context_overflow_compacts_once_and_retries(driver_for):
    script = rules(
        summary_rule("## Goal\nKeep going."),
        {
            "match": {"contains": "big request"},
            "reply": {"steps": [{"text": "Let me"}], "error": "prompt is too long: 213462 tokens > 200000 maximum"},
        },
        # keep-recent of 1 token cuts at the failed reply: the retry's last user message is the summary.
        {"match": {"contains": "was compacted into"}, "reply": [{"text": "after compaction"}]},
    )
    driver = driver_for(script, compaction_keep_recent_tokens=1)
    driver.prompt("hello there")
    run = driver.prompt("big request")
    assert run.status == RunStatus.COMPLETED, run.error
    path = get_provider("file").get_active_path(driver.session_id)
    kinds = [e["type"] for e in path]
    assert kinds.count("compaction") == 1
    compaction = path[kinds.index("compaction")]
    assert compaction["summary"].startswith("## Goal\nKeep going.")
    # The failed reply stays in the tree; the retry comes after the compaction.
    errors = [e for e in path if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(errors) == 1 and path.index(errors[0]) < kinds.index("compaction")
    assert path[-1]["message"]["content"][0]["text"] == "after compaction"
    assert roles(driver)[0] == "compactionSummary"


def test_a_second_overflow_is_not_retried(driver_for):
    script = rules(
        summary_rule(),
        {"match": {"regex": "big request|was compacted"}, "reply": {"steps": [], "error": "prompt is too long: 9 tokens > 8 maximum"}},
    )
    driver = driver_for(script, compaction_keep_recent_tokens=1)
    run = driver.prompt("big request")
    assert run.status == RunStatus.FAILED and "prompt is too long" in run.error
    kinds = [e["type"] for e in get_provider("file").get_active_path(driver.session_id)]
    assert kinds.count("compaction") == 1


def test_continue_from_a_user_message_branches(driver_for):
    driver = driver_for(rules())
    driver.prompt("first")
    first_user = get_provider("file").get_active_path(driver.session_id)[-2]
    assert first_user["message"]["role"] == "user"
    run = driver.prompt("first, edited", from_entry_id=first_user["id"])
    assert run.status == RunStatus.COMPLETED
    entries = get_provider("file").list_entries(driver.session_id)
    siblings = [e for e in entries if e["parentId"] == first_user["parentId"] and e["type"] == "message"]
    assert len(siblings) == 2  # the original and the edit
    assert [m["content"][0]["text"] for m in messages(driver)] == ["first, edited", "echo: first, edited"]


def test_bad_prompts_are_refused_without_writing(driver_for):
    driver = driver_for(rules())
    before = get_provider("file").get_session(driver.session_id).revision
    for kwargs, field in (
        ({"text": ""}, "text"),
        ({"text": "x", "images": [{"data": "...", "mimeType": "text/plain"}]}, "images[0]"),
        ({"text": "x", "images": [{"data": "!!", "mimeType": "image/png"}]}, "images[0]"),
        ({"text": "x", "images": [{"data": "data:image/png;base64,AAAA", "mimeType": "image/png"}]}, "images[0]"),
        ({"text": "x", "images": [{"data": "AAAA\nAAAA", "mimeType": "image/png"}]}, "images[0]"),
        ({"text": "x", "mode": "shout"}, "mode"),
        ({"text": "x", "model_name": "nope"}, "model"),
    ):
        with pytest.raises(RuntimeInputError) as failure:
            session_prompt(actor=None, session_id=driver.session_id, dispatch=False, **kwargs)
        assert failure.value.field == field
    assert AgentRun.objects.count() == 0
    assert get_provider("file").get_session(driver.session_id).revision == before


def test_deltas_carry_their_offset(driver_for):
    driver = driver_for(rules(default={"reply": [{"text": "abcdefghij" * 5, "chunk_size": 3}]}))
    driver.prompt("x")
    rebuilt = ""
    for delta in driver.sink.of_type("assistant_stream_delta"):
        assert delta["offset"] == len(rebuilt)
        rebuilt += delta["delta"]
    assert rebuilt == "abcdefghij" * 5


def test_runtime_snapshot_has_the_context_window_and_run_state(driver_for):
    from runtime.sessions.selectors import session_snapshot

    driver = driver_for(rules(), context_window=64000)
    driver.prompt("x")
    snapshot = session_snapshot(driver.session_id)
    assert snapshot["runtimeContext"]["contextWindow"] == 64000
    assert snapshot["runtimeContext"]["runState"] == {"state": "idle", "runId": None}
    assert snapshot["runtimeContext"]["model"] == {"provider": "scripted", "modelId": "scripted-test"}
    outcome = session_prompt(actor=None, session_id=driver.session_id, text="queued", dispatch=False)
    assert session_snapshot(driver.session_id)["runtimeContext"]["runState"] == {"state": "queued", "runId": str(outcome.run.run_id)}


@pytest.mark.oracle
def test_pi_reads_back_every_turn_scenario(driver_for, oracle, tmp_path):
    """Tool rounds, blocked tools, abort (text and tool), max rounds, follow-up,
    steer, model error, overflow → compact → retry, continue-from: each tree,
    exported, gives Pi the context Neta holds (one batched oracle run)."""
    import json
    import subprocess

    from sessions_tree.pi_view import session_view

    scenarios = []

    def keep(driver):
        provider = get_provider(driver.agent.session_provider)
        path = tmp_path / f"{len(scenarios)}.jsonl"
        path.write_text("".join(provider.export_lines(driver.session_id)))
        scenarios.append((path, provider.session_source(driver.session_id)))

    loop = {"match": {"contains": "loop"}, "reply": [{"tool_call": {"name": "ls", "arguments": {"path": "."}}}]}
    slow = {"match": {"contains": "slow"}, "reply": [{"text": "word " * 300, "delay_ms": 3, "chunk_size": 4}]}
    sleeper = {
        "match": {"contains": "sleeper"},
        "replies": [[{"tool_call": {"name": "bash", "arguments": {"command": "sleep 20"}}}], [{"text": "never"}]],
    }
    overflow = {"match": {"contains": "big request"}, "reply": {"steps": [{"text": "Let me"}], "error": "prompt is too long: 5 tokens > 4 maximum"}}
    compacted = {"match": {"contains": "was compacted into"}, "reply": [{"text": "after compaction"}]}
    broken = {"match": {"contains": "explode"}, "reply": {"steps": [{"text": "par"}], "error": "upstream exploded"}}
    script = rules(summary_rule(), WRITE_THEN_READ, loop, slow, sleeper, overflow, compacted, broken)

    driver = driver_for(script, name="many", max_tool_rounds=2, compaction_keep_recent_tokens=1)
    driver.prompt("please make a file")
    driver.prompt("loop forever")  # stops at max rounds
    driver.prompt("explode now")
    first_user = get_provider("file").get_active_path(driver.session_id)[2]
    driver.prompt("edited start", from_entry_id=first_user["id"])
    keep(driver)

    driver = driver_for(script, name="aborts")
    for text, wait_kind in (("slow talk", "assistant_stream_delta"), ("sleeper please", "tool_call_completed")):
        seen = len(driver.sink.of_type(wait_kind))
        thread, holder, _ = driver.start(text)
        wait_for(lambda: len(driver.sink.of_type(wait_kind)) > seen)
        time.sleep(0.2)
        run_abort(actor=None, session_id=driver.session_id)
        thread.join(timeout=30)
        assert holder[0].status == RunStatus.ABORTED
    keep(driver)

    driver = driver_for(script, name="queues")
    thread, holder, _ = driver.start("slow talk")
    wait_for(lambda: driver.sink.of_type("assistant_stream_delta"))
    session_prompt(actor=None, session_id=driver.session_id, text="a follow-up")
    thread.join(timeout=30)
    keep(driver)

    driver = driver_for(script, name="overflows", compaction_keep_recent_tokens=1)
    driver.prompt("hello")
    driver.prompt("big request")
    keep(driver)

    jobs = [{"file": str(path), "out": str(path) + ".pi.json"} for path, _ in scenarios]
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    done = subprocess.run([str(oracle), "context-batch", str(jobs_file)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for (path, (header, entries, leaf)), job in zip(scenarios, jobs):
        pi = json.loads(open(job["out"]).read())
        assert "error" not in pi, pi
        assert pi["leafId"] == leaf
        assert session_view(header, entries, leaf, file_version=3) == pi, path.name


def test_a_turn_streams_fewer_larger_deltas_while_the_process_budget_is_shared(driver_for, settings):
    """Many busy streams in the process: a run's deltas come less often, the text whole."""
    from runtime.realtime import sinks

    text = "abcdefghij" * 12
    reply = rules(default={"reply": [{"text": text, "chunk_size": 2, "delay_ms": 10}]})
    driver = driver_for(reply)
    driver.prompt("x")
    alone_deltas = driver.sink.of_type("assistant_stream_delta")

    budget = sinks.StreamBudget(20)  # 20 messages a second for the process
    previous, sinks._budget = sinks._budget, budget
    try:
        def others_stream():  # 39 other streams keep sending: each run's share is 0.5 a second
            import threading

            stop = threading.Event()

            def loop():
                while not stop.is_set():
                    now = time.monotonic()
                    for other in range(39):
                        budget.interval(-1 - other, now)
                    time.sleep(0.05)

            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            return stop, thread

        stop, thread = others_stream()
        time.sleep(0.3)
        try:
            driver.prompt("y")
        finally:
            stop.set()
            thread.join()
    finally:
        sinks._budget = previous
    crowded_deltas = driver.sink.of_type("assistant_stream_delta")[len(alone_deltas) :]
    assert "".join(d["delta"] for d in alone_deltas) == text == "".join(d["delta"] for d in crowded_deltas)
    assert len(alone_deltas) >= 10  # ~0.6 s of 10 ms deltas at 20 a second
    assert len(crowded_deltas) <= 3, [d["delta"] for d in crowded_deltas]
