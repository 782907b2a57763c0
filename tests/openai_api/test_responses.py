"""``/v1/models`` and ``/v1/responses`` through the official ``openai`` SDK (sync and async,
streaming and not): a three-turn conversation is one session's path; a ``previous_response_id``
that is not the leaf makes a branch; ``GET /v1/responses/{id}`` answers the same response;
instructions reach the system prompt and are recorded; usage sums the turn's model calls."""

from __future__ import annotations

import asyncio

import pytest

from tests.openai_api.openai_support import by_id, children, conversation, role, text_of

pytestmark = [pytest.mark.slow]

SESSION = "x-neta-session-id"


def created(client, **kwargs):
    """(response, session id) of a non-streamed create."""
    raw = client.responses.with_raw_response.create(model="default", **kwargs)
    return raw.parse(), raw.headers[SESSION]


def streamed(client, **kwargs):
    """(events, session id) of a streamed create."""
    stream = client.responses.create(model="default", stream=True, **kwargs)
    session_id = stream.response.headers[SESSION]
    return list(stream), session_id


def entry_of(item_id: str) -> str:
    assert item_id.startswith("msg_")
    return item_id[len("msg_") :]


def test_models_are_the_agents_the_caller_may_use(deployment):
    alice = [m.id for m in deployment.client().models.list()]
    assert "default" in alice and "secret" not in alice  # secret is restricted to nobody
    model = deployment.client().models.retrieve("default")
    assert (model.id, model.object, model.owned_by) == ("default", "model", "neta")
    import openai

    with pytest.raises(openai.NotFoundError) as missing:
        deployment.client().models.retrieve("secret")
    assert missing.value.body["code"] == "model_not_found" and missing.value.body["param"] == "model"


def test_three_turns_are_one_path_and_a_previous_response_branches(deployment):
    client = deployment.client()
    # 1: not streamed, a new session.
    first, sid = created(client, input="first question")
    assert first.status == "completed" and first.output_text == "Echo: first question"
    assert first.previous_response_id is None
    # 2: streamed; the agent calls a tool on the server (two model calls, two message items).
    events, sid2 = streamed(client, input="use a tool please", previous_response_id=first.id)
    assert sid2 == sid
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Let me look.Done looking."
    second = events[-1].response
    assert [item.content[0].text for item in second.output] == ["Let me look.", "Done looking."]
    # The response id names the turn's last assistant entry; the created event named its first.
    last_entry, first_entry = entry_of(second.output[-1].id), entry_of(second.output[0].id)
    assert second.id.endswith(last_entry) and events[0].response.id.endswith(first_entry)
    assert second.previous_response_id == first.id
    # 3: async, not streamed.
    third = asyncio.run(deployment.async_client().responses.create(model="default", input="third one", previous_response_id=second.id))
    assert third.output_text == "Echo: third one"

    entries = deployment.entries(sid)
    assert conversation(entries, entry_of(third.output[0].id)) == [
        ("user", "first question"),
        ("assistant", "Echo: first question"),
        ("user", "use a tool please"),
        ("assistant", "Let me look."),
        ("assistant", "Done looking."),
        ("user", "third one"),
        ("assistant", "Echo: third one"),
    ]
    # The tool ran on the server and is in the session, between the two replies.
    index = by_id(entries)
    tool_result = index[index[last_entry]["parentId"]]
    assert role(tool_result) == "toolResult" and tool_result["message"]["toolName"] == "ls"
    # usage sums the turn's two model calls.
    replies = [index[first_entry]["message"], index[last_entry]["message"]]
    assert second.usage.output_tokens == sum(m["usage"]["output"] for m in replies)
    assert second.usage.input_tokens == sum(m["usage"]["input"] + m["usage"]["cacheRead"] + m["usage"]["cacheWrite"] for m in replies)
    assert second.usage.total_tokens == second.usage.input_tokens + second.usage.output_tokens

    # A previous_response_id at the first answer (not the leaf): a new branch there.
    branch, sid4 = created(client, input="another way", previous_response_id=first.id)
    assert sid4 == sid and branch.previous_response_id == first.id
    entries = deployment.entries(sid)
    index = by_id(entries)
    first_answer = entry_of(first.output[0].id)
    # The branch is where the first turn ends: its answer, or the title the run wrote after it.
    users = {text_of(e): e for e in entries if role(e) == "user"}
    point = users["another way"]["parentId"]
    assert users["use a tool please"]["parentId"] == point
    assert point == first_answer or (index[point]["parentId"] == first_answer and role(index[point]) is None)
    assert sorted(text_of(e) for e in children(entries, point) if role(e)) == ["another way", "use a tool please"]
    assert deployment.session(sid)["leafEntryId"] == entry_of(branch.output[0].id)
    # The older branch goes on where it ended.
    fourth, _ = created(client, input="fourth", previous_response_id=third.id)
    assert conversation(deployment.entries(sid), entry_of(fourth.output[0].id))[-4:] == [
        ("user", "third one"), ("assistant", "Echo: third one"), ("user", "fourth"), ("assistant", "Echo: fourth"),
    ]  # fmt: skip

    # GET answers each response again, as the tree holds it.
    again = client.responses.retrieve(second.id)
    assert (again.id, again.status, again.output_text, again.previous_response_id) == (second.id, "completed", "Let me look.Done looking.", first.id)
    assert again.usage.output_tokens == second.usage.output_tokens and again.created_at == second.created_at
    # The id the stream started with names the same response.
    assert client.responses.retrieve(events[0].response.id).id == second.id


def test_instructions_reach_the_system_prompt_and_are_recorded(deployment):
    client = deployment.client()
    plain, _ = created(client, input="Who are you?")
    assert plain.output_text == "Echo: Who are you?"
    told, sid = created(client, input="Who are you?", instructions="You are in PIRATE mode.")
    assert told.output_text == "Arr, a pirate agent." and told.instructions == "You are in PIRATE mode."
    # A system (developer) message in the input is taken the same way.
    message, _ = created(client, input=[{"role": "developer", "content": "PIRATE"}, {"role": "user", "content": "who are you"}])
    assert message.output_text == "Arr, a pirate agent."
    # Recorded on the run, and for this call only: the next turn has none unless sent again.
    (run,) = deployment.runs(sid)
    assert run["instructions"] == "You are in PIRATE mode." and run["status"] == "completed"
    assert client.responses.retrieve(told.id).instructions == "You are in PIRATE mode."
    after, _ = created(client, input="who are you then", previous_response_id=told.id)
    assert after.output_text == "Echo: who are you then" and after.instructions is None


def test_sampling_parameters_are_recorded_with_the_run(deployment):
    client = deployment.client()
    response, sid = created(client, input="sample me", temperature=0.3, top_p=0.9, max_output_tokens=50)
    assert (response.temperature, response.top_p, response.max_output_tokens) == (0.3, 0.9, 50)
    (run,) = deployment.runs(sid)
    assert run["sampling"] == {"temperature": 0.3, "top_p": 0.9, "max_tokens": 50}


def test_a_conversation_in_the_input_becomes_the_sessions_history(deployment):
    client = deployment.client()
    response, sid = created(
        client,
        input=[
            {"role": "user", "content": "I am Ada."},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hello Ada."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Who am I?"}]},
        ],
    )
    entries = deployment.entries(sid)
    assert conversation(entries, entry_of(response.output[0].id)) == [
        ("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "Who am I?"), ("assistant", "Echo: Who am I?"),
    ]  # fmt: skip
    brought = next(e for e in entries if role(e) == "assistant" and text_of(e) == "Hello Ada.")
    assert brought["message"]["provider"] == "client"  # the client's message, not the agent's


def test_an_image_goes_with_the_prompt(deployment):
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    response, sid = created(
        deployment.client(),
        input=[{"role": "user", "content": [{"type": "input_text", "text": "what is this"}, {"type": "input_image", "image_url": f"data:image/png;base64,{pixel}"}]}],
    )
    assert response.status == "completed"
    prompt = next(e for e in deployment.entries(sid) if role(e) == "user")
    assert {"type": "image", "data": pixel, "mimeType": "image/png"} in prompt["message"]["content"]


def test_a_failing_model_fails_the_response(deployment):
    client = deployment.client()
    failed, sid = created(client, input="break down now")
    assert failed.status == "failed" and "upstream overloaded" in failed.error.message
    assert failed.output_text == "Partial"  # what it wrote before it failed is kept
    events, _ = streamed(client, input="break down again")
    assert events[-1].type == "response.failed" and "upstream overloaded" in events[-1].response.error.message
    assert client.responses.retrieve(failed.id).status == "failed"


def test_async_streaming(deployment):
    async def scenario():
        client = deployment.async_client()
        stream = await client.responses.create(model="default", input="async stream", stream=True)
        events = [event async for event in stream]
        return events

    events = asyncio.run(scenario())
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Echo: async stream"
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "Echo: async stream"


def test_two_text_blocks_are_two_content_parts(deployment):
    events, _ = streamed(deployment.client(), input="two blocks please")
    final = events[-1].response
    assert [part.text for part in final.output[0].content] == ["First block.", "Second block."]
    streamed_parts: dict[int, str] = {}
    for event in events:
        if event.type == "response.output_text.delta":
            streamed_parts[event.content_index] = streamed_parts.get(event.content_index, "") + event.delta
    assert streamed_parts == {0: "First block.", 1: "Second block."}


def test_a_question_the_agent_asks_ends_the_response_incomplete(deployment):
    client = deployment.client()
    asked, sid = created(client, input="a question for me")
    assert asked.status == "incomplete" and asked.incomplete_details.reason == "waiting_for_answer"
    assert asked.output_text == "I need a decision."
    (run,) = deployment.runs(sid)
    assert run["status"] == "waiting" and run["question"]["question"] == "Which one?"
    # The question is answered where questions are answered (the page, REST); the run goes on.
    status, body = deployment.rest("post", f"/api/sessions/{sid}/answer/", {"toolCallId": run["question"]["toolCallId"], "answer": "B"})
    assert status == 200, body
