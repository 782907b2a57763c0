"""The OpenAI room's pure parts: ids, the conversation digests, the error mapping, the request
checks. (The endpoints themselves are tested through the SDK against Daphne.)"""

from __future__ import annotations

import uuid

import pytest
from rest_framework import exceptions

from runtime.openai_api import ids
from runtime.openai_api.conversation import path_nodes, request_digests, tree_nodes, turn_text
from runtime.openai_api.errors import OpenAIError, as_openai
from runtime.openai_api.inputs import Message, chat_call, responses_call
from runtime.runs.turn import user_message


def test_response_ids_name_a_session_and_an_entry_both_ways():
    sid = str(uuid.uuid4())
    assert ids.parse_response_id(ids.response_id(sid, "0badf00d")) == (sid, "0badf00d")
    assert ids.response_id(sid, "0badf00d") == "resp_" + sid.replace("-", "") + "0badf00d"
    for odd_sid, odd_entry in (("imported session é", "x/y"), ("a" * 64, "e" * 64), (sid, "not-an-id!")):
        assert ids.parse_response_id(ids.response_id(odd_sid, odd_entry)) == (odd_sid, odd_entry)
    run = uuid.uuid4()
    assert ids.parse_response_id(ids.run_response_id(run)) == str(run)
    for bogus in (None, 3, "", "resp_", "resp_zz", "chatcmpl-1", "resp_" + "0" * 32, "resp_x!!", "resp_" + "a" * 600):
        assert ids.parse_response_id(bogus) is None


def entry(eid, parent, role, text, stop="stop"):
    if role == "user":
        message = user_message(text)
    elif role == "assistant":
        message = {"role": "assistant", "content": [{"type": "text", "text": text}] if text else [], "stopReason": stop}
    else:
        message = {"role": "toolResult", "toolCallId": "c", "toolName": "ls", "content": [{"type": "text", "text": text}]}
    return {"type": "message", "id": eid, "parentId": parent, "message": message}


def test_a_turns_replies_are_one_message_and_digests_match_the_request():
    path = [
        {"type": "model_change", "id": "m", "parentId": None},
        entry("u1", "m", "user", "hi"),
        entry("a1", "u1", "assistant", "Let me look.", stop="toolUse"),
        entry("t1", "a1", "toolResult", "files"),
        entry("a2", "t1", "assistant", "Done."),
        {"type": "session_info", "id": "s", "parentId": "a2", "name": "title"},
        entry("u2", "s", "user", "next"),
    ]
    nodes = path_nodes(path)
    assert [(n.role, n.entry_id, n.depth) for n in nodes] == [("user", "u1", 1), ("assistant", "a2", 2), ("user", "u2", 3)]
    asked = [Message("user", "hi"), Message("assistant", "Let me look.\n\nDone."), Message("user", "next")]
    assert [n.digest for n in nodes] == request_digests(asked)
    assert turn_text([path[2]["message"], path[4]["message"]]) == "Let me look.\n\nDone."
    # Whitespace around a message does not matter; its words do.
    assert request_digests([Message("user", " hi\n")])[0] == nodes[0].digest
    assert request_digests([Message("user", "hi!")])[0] != nodes[0].digest
    # The whole tree (every branch) gives the same digests for the same paths.
    branch = entry("u3", "a2", "user", "elsewhere")
    found = tree_nodes([*path, branch])
    assert found[nodes[2].digest].entry_id == "u2"
    assert found[request_digests([*asked[:2], Message("user", "elsewhere")])[2]].entry_id == "u3"


def test_errors_take_openais_shape():
    throttled = as_openai(exceptions.Throttled(wait=3))
    assert (throttled.status, throttled.code, throttled.headers) == (429, "rate_limit_exceeded", {"Retry-After": "3"})
    unauthenticated = as_openai(exceptions.NotAuthenticated())
    assert (unauthenticated.status, unauthenticated.code, unauthenticated.headers) == (401, "invalid_api_key", {"WWW-Authenticate": "Bearer"})
    from runtime.errors import RuntimeInputError
    from sessions_tree.errors import SessionBusy

    assert as_openai(RuntimeInputError("images", "too big")).param == "input"
    busy = as_openai(SessionBusy("a run is active"))
    assert (busy.status, busy.code) == (409, "session_busy")
    assert as_openai(KeyError("x")) is None  # unexpected: the handler logs it and answers 500


def test_requests_are_read_into_one_conversation():
    call = chat_call({
        "model": "default", "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.5, "stop": "END",
        "max_completion_tokens": 100, "reasoning_effort": "low",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                     {"role": "assistant", "content": None}, {"role": "developer", "content": "And kind."}, {"role": "user", "content": "c"}],
    })  # fmt: skip
    assert [(m.role, m.text) for m in call.messages] == [("user", "a\nb"), ("assistant", ""), ("user", "c")]
    assert call.instructions == "Be brief.\n\nAnd kind." and call.effort == "low" and call.include_usage
    assert call.sampling == {"temperature": 0.5, "stop": ["END"], "max_tokens": 100}
    call = responses_call({"model": "default", "input": "hi", "instructions": "Short.", "reasoning": {"effort": "none"}, "store": False, "metadata": {"a": 1}})
    assert call.prompt.text == "hi" and call.history == [] and call.instructions == "Short." and call.effort == "off"
    with pytest.raises(OpenAIError) as refused:
        responses_call({"model": "default", "input": [{"type": "reasoning", "summary": []}, {"role": "user", "content": "x"}]})
    assert refused.value.param == "input[0].type"


@pytest.mark.django_db(transaction=True)
def test_an_answer_never_sent_aborts_its_run(owner, sessions_dir, tmp_path, settings):
    """A client that leaves before its answer begins: the run, recorded but never handed to its
    backend, is aborted when the answer is dropped (not left queued, holding the session)."""
    import gc
    import time
    from types import SimpleNamespace

    from runtime.models import AgentRun
    from runtime.openai_api.answers import chat_answer, response_answer
    from runtime.openai_api.start import start_chat, start_response
    from tests.support.builders import default_agent

    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    agent = default_agent()
    request = SimpleNamespace(user=owner, auth=None)
    runs = []
    for start, answer, body in (
        (start_response, response_answer, responses_call({"model": agent.name, "input": "never sent", "stream": True})),
        (start_response, response_answer, responses_call({"model": agent.name, "input": "never sent either"})),
        (lambda r, c: start_chat(r, c, None), chat_answer, chat_call({"model": agent.name, "messages": [{"role": "user", "content": "nor this"}]})),
    ):
        started = start(request, body)
        runs.append(started.run.pk)
        dropped = answer(started, owner)
        assert AgentRun.objects.get(pk=started.run.pk).status == "queued"
        del dropped
        gc.collect()
    deadline = time.monotonic() + 30
    while set(AgentRun.objects.filter(pk__in=runs).values_list("status", flat=True)) != {"aborted"}:
        assert time.monotonic() < deadline, list(AgentRun.objects.filter(pk__in=runs).values_list("status", flat=True))
        time.sleep(0.05)


@pytest.mark.django_db
def test_conversation_nodes_go_with_their_session(owner, sessions_dir, tmp_path, settings):
    from runtime.models import ConversationNode
    from runtime.openai_api.conversation import find_in_sessions, index_conversation
    from runtime.openai_api.start import stored_message
    from runtime.sessions.services import session_delete, session_start
    from sessions_tree.providers import get_provider
    from tests.support.builders import default_agent

    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    agent = default_agent()
    meta = session_start(agent=agent, user=owner)
    provider = get_provider(meta.provider)
    talk = [Message("user", "q"), Message("assistant", "a"), Message("user", "q2"), Message("assistant", "a2")]
    for message in talk:
        leaf = provider.append_message(meta.session_id, stored_message(message))["id"]
    assert index_conversation(meta.session_id, leaf) == 4
    assert index_conversation(meta.session_id, leaf) == 0  # nodes are written once
    match = find_in_sessions(owner_id=owner.pk, agent=agent.name, digests=request_digests([*talk, Message("user", "q3")]))
    assert (match.session_id, match.entry_id, match.depth) == (meta.session_id, leaf, 4)
    assert find_in_sessions(owner_id=owner.pk + 1, agent=agent.name, digests=request_digests(talk)) is None  # owners only
    session_delete(session_id=meta.session_id, actor=owner)
    assert not ConversationNode.objects.exists()
