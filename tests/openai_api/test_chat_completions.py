"""``/v1/chat/completions`` through the official ``openai`` SDK: a client that resends its
history continues the same session; one that edits an earlier message branches there; one that
sends its history up to a user message again gets a new answer beside the old one; a history
the caller's sessions do not hold starts a new session; ``X-Neta-Session-Id`` pins one."""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.openai_api.openai_support import by_id, children, conversation, role, text_of, wait_for_run

pytestmark = [pytest.mark.slow]

SESSION = "x-neta-session-id"


def chat(client, messages, **kwargs):
    """(content, session id, completion) of a non-streamed completion."""
    raw = client.chat.completions.with_raw_response.create(model="default", messages=messages, **kwargs)
    completion = raw.parse()
    return completion.choices[0].message.content, raw.headers[SESSION], completion


def chat_stream(client, messages, **kwargs):
    """(content, session id, chunks) of a streamed completion."""
    stream = client.chat.completions.create(model="default", messages=messages, stream=True, **kwargs)
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return content, stream.response.headers[SESSION], chunks


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def answers(entries, text):
    """The assistant replies right under the user message ``text``."""
    (message,) = [e for e in entries if role(e) == "user" and text_of(e) == text]
    return [text_of(e) for e in children(entries, message["id"]) if role(e) == "assistant"]


def test_a_resent_history_continues_and_an_edit_branches(deployment):
    client = deployment.client()
    history = [{"role": "system", "content": "Be brief."}, user("resend one")]
    a1, sid, completion = chat(client, history)
    assert a1 == "Echo: resend one" and completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0
    # The client resends everything with a new message (streamed this time): same session.
    history += [assistant(a1), user("use a tool now")]
    a2, sid2, chunks = chat_stream(client, history, stream_options={"include_usage": True})
    assert sid2 == sid and a2 == "Let me look.\n\nDone looking."  # the turn's replies, one message
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    history += [assistant(a2), user("resend three")]
    a3, sid3, _ = chat(client, history)
    assert sid3 == sid and a3 == "Echo: resend three"
    entries = deployment.entries(sid)
    leaf = deployment.session(sid)["leafEntryId"]
    assert conversation(entries, leaf) == [
        ("user", "resend one"), ("assistant", "Echo: resend one"),
        ("user", "use a tool now"), ("assistant", "Let me look."), ("assistant", "Done looking."),
        ("user", "resend three"), ("assistant", "Echo: resend three"),
    ]  # fmt: skip
    # The system message went with each run as its instructions.
    assert {r["instructions"] for r in deployment.runs(sid)} == {"Be brief."}

    # The client edits its second message: a branch where the histories part.
    edited = history[:3] + [user("edited two")]
    a4, sid4, _ = chat(client, edited)
    assert sid4 == sid and a4 == "Echo: edited two"
    entries = deployment.entries(sid)
    index = by_id(entries)
    users = {text_of(e): e for e in entries if role(e) == "user"}
    point = users["edited two"]["parentId"]
    assert users["use a tool now"]["parentId"] == point
    assert conversation(entries, point) == [("user", "resend one"), ("assistant", "Echo: resend one")]
    assert role(index[point]) is None or role(index[point]) == "assistant"
    # and the older branch still continues where it was
    a5, sid5, _ = chat(client, history + [assistant(a3), user("resend four")])
    assert sid5 == sid and conversation(deployment.entries(sid), deployment.session(sid)["leafEntryId"])[-3:] == [
        ("assistant", "Echo: resend three"), ("user", "resend four"), ("assistant", "Echo: resend four"),
    ]  # fmt: skip


def test_the_history_up_to_a_user_message_again_is_a_regeneration(deployment):
    client = deployment.client()
    a1, sid, _ = chat(client, [user("regen one")])
    history = [user("regen one"), assistant(a1), user("regen two")]
    first, _, _ = chat(client, history)
    again, sid2, _ = chat(client, history)  # the client's "regenerate": the same history
    assert sid2 == sid and first == again == "Echo: regen two"
    entries = deployment.entries(sid)
    assert answers(entries, "regen two") == ["Echo: regen two", "Echo: regen two"]  # two siblings
    assert len([e for e in entries if role(e) == "user" and text_of(e) == "regen two"]) == 1


def test_a_new_conversation_starts_a_new_session(deployment):
    client = deployment.client()
    _, sid, _ = chat(client, [user("hello new")])
    # The same first message again is a new conversation (a first message alone names no session).
    _, other, _ = chat(client, [user("hello new")])
    assert other != sid
    # A history the caller never had: a new session holding it.
    content, fresh, _ = chat(client, [user("from elsewhere"), assistant("an answer from another model"), user("and now?")])
    assert fresh not in (sid, other) and content == "Echo: and now?"
    brought = [e for e in deployment.entries(fresh) if role(e) == "assistant" and text_of(e) == "an answer from another model"]
    assert brought and brought[0]["message"]["provider"] == "client"


def test_the_session_header_pins_a_session(deployment):
    client = deployment.client()
    a1, sid, _ = chat(client, [user("pinned one")])
    pinned = client.with_options(default_headers={"X-Neta-Session-Id": sid})
    # A first message alone, pinned: a new answer to it in that session.
    _, sid2, _ = chat(pinned, [user("pinned one")])
    assert sid2 == sid and answers(deployment.entries(sid), "pinned one") == ["Echo: pinned one", "Echo: pinned one"]
    # A conversation the session does not hold, pinned: a new branch of it from its start.
    _, sid3, _ = chat(pinned, [user("something else")])
    assert sid3 == sid
    entries = deployment.entries(sid)
    starts = {e["parentId"] for e in entries if role(e) == "user"}
    assert len(starts) == 1  # both conversations start at the same place (after the session's header entries)


def test_async_client_streaming_and_not(deployment):
    async def scenario():
        client = deployment.async_client()
        completion = await client.chat.completions.create(model="default", messages=[user("async one")])
        stream = await client.chat.completions.create(
            model="default", messages=[user("async one"), assistant(completion.choices[0].message.content), user("async two")], stream=True
        )
        chunks = [chunk async for chunk in stream]
        return completion, chunks, stream.response.headers[SESSION]

    completion, chunks, sid = asyncio.run(scenario())
    assert completion.choices[0].message.content == "Echo: async one"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: async two"
    assert conversation(deployment.entries(sid), deployment.session(sid)["leafEntryId"])[-2:] == [("user", "async two"), ("assistant", "Echo: async two")]


def test_a_failing_model_is_an_error(deployment):
    client = deployment.client()
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="default", messages=[user("break down here")])
    assert failed.value.status_code == 502 and "upstream overloaded" in failed.value.body["message"]
    assert failed.value.body["type"] == "server_error" and failed.value.body["code"] == "run_failed"
    stream = client.chat.completions.create(model="default", messages=[user("break down there")], stream=True)
    with pytest.raises(openai.APIError) as broken:
        list(stream)
    assert "upstream overloaded" in str(broken.value)


def test_a_busy_session_is_409(deployment):
    client = deployment.client()
    stream = client.chat.completions.create(model="default", messages=[user("hold on a moment")], stream=True)
    sid = stream.response.headers[SESSION]
    next(iter(stream))  # the run is under way
    pinned = client.with_options(default_headers={"X-Neta-Session-Id": sid})
    with pytest.raises(openai.ConflictError) as busy:
        pinned.chat.completions.create(model="default", messages=[user("meanwhile")])
    assert busy.value.body["code"] == "session_busy"
    stream.close()  # and the held run is aborted
    assert wait_for_run(deployment, sid, "aborted", "completed", "failed")["status"] == "aborted"
