"""The chat page's everyday controls over the API: regenerate an answer,
the model and thinking level of a prompt, search, a fork's name, auto-titles."""

from __future__ import annotations

import logging

import pytest

from runtime.models import AgentRun, ModelConfig
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt, session_regenerate
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_fork, session_rename, session_start
from sessions_tree.providers import get_provider
from tests.support.builders import assert_error
from tests.support.entries import assistant_message, user_message


def children(provider, sid, parent_id):
    return [e["id"] for e in provider.list_entries(sid) if e.get("parentId") == parent_id]


def run_now(run):
    return execute_run(run.run_id, sink=InMemorySink())


# --------------------------------------------------------------------------- regenerate


def test_regenerate_answers_the_same_user_message_again_as_a_sibling(tree, owner):
    provider = get_provider("file")
    sid, ids = tree.session_id, tree.ids
    before = provider.list_entries(sid)
    run = session_regenerate(session_id=sid, entry_id=ids["u1"], actor=owner, dispatch=False)
    assert run.prompt_entry_id == ids["u1"] and run.prompt == "first question"
    assert provider.get_session(sid).leaf_entry_id == ids["u1"]  # moved there before the run
    finished = run_now(run)
    assert finished.status == "completed", finished.error
    entries = provider.list_entries(sid)
    added = entries[len(before):]
    # Only the new answer: no second copy of the user message.
    assert [(e["type"], e["message"]["role"]) for e in added] == [("message", "assistant")]
    assert added[0]["parentId"] == ids["u1"]
    assert children(provider, sid, ids["u1"]) == [ids["a1"], added[0]["id"]]
    assert "first question" in added[0]["message"]["content"][0]["text"]
    assert provider.get_session(sid).leaf_entry_id == added[0]["id"]
    assert AgentRun.objects.get(pk=run.pk).prompt_entry_id == ids["u1"]


def test_a_regenerated_answer_stays_a_sibling_when_compaction_is_due(owner, agent):
    """No compaction before a regenerated answer: it would stand between the message and
    the new answer (the run's end may compact, after the answer)."""
    from runtime.models import Agent

    sid = session_start(agent=agent, user=owner).session_id
    for text in ("first question", "second question"):
        assert run_now(session_prompt(session_id=sid, text=text, actor=owner, dispatch=False).run).status == "completed"
    provider = get_provider(agent.session_provider or "file")
    question = next(e for e in provider.get_active_path(sid) if e.get("type") == "message" and e["message"]["role"] == "user" and "second" in str(e["message"]["content"]))
    Agent.objects.filter(pk=agent.pk).update(compaction_reserve_tokens=agent.model.context_window + 1000, compaction_keep_recent_tokens=1)  # always due
    finished = run_now(session_regenerate(session_id=sid, entry_id=question["id"], actor=owner, dispatch=False))
    assert finished.status == "completed", finished.error
    answers = [e for e in provider.list_entries(sid) if e.get("parentId") == question["id"]]
    assert [(e["type"], (e.get("message") or {}).get("role")) for e in answers] == [("message", "assistant"), ("message", "assistant")]


def test_regenerate_over_rest_starts_a_run_and_bad_input_is_a_4xx_writing_nothing(client_for, tree, owner):
    client = client_for("owner")
    url = f"/api/sessions/{tree.session_id}/regenerate/"
    provider = get_provider("file")
    leaf = provider.get_session(tree.session_id).leaf_entry_id
    count = len(provider.list_entries(tree.session_id))
    assert_error(client.post(url, {}), 400, "invalid", "entryId")
    assert_error(client.post(url, {"entryId": "nope0000"}), 400, "entry_not_found", "entryId")
    assert_error(client.post(url, {"entryId": tree.ids["a1"]}), 400, "invalid", "entryId")  # an answer, not a user message
    assert_error(client.post(url, {"entryId": tree.ids["u1"], "model": "no-such-model"}), 400, "invalid", "model")
    assert_error(client.post(url, {"entryId": 5}), 400, "invalid", "entryId")
    assert_error(client_for("outsider").post(url, {"entryId": tree.ids["u1"]}), 404, "session_not_found")
    busy = AgentRun.objects.create(session_id=tree.session_id, agent_id=1, prompt="x", status="running")
    assert_error(client.post(url, {"entryId": tree.ids["u1"]}), 409, "session_busy")
    busy.delete()
    assert not AgentRun.objects.exists()
    assert provider.get_session(tree.session_id).leaf_entry_id == leaf
    assert len(provider.list_entries(tree.session_id)) == count
    response = client.post(url, {"entryId": tree.ids["u3"]}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["run"]["fromEntryId"] == tree.ids["u3"]


# --------------------------------------------------------------------------- model and thinking level


def test_prompt_model_and_thinking_level_are_checked_against_the_models_capabilities(client_for, tree, agent):
    ModelConfig.objects.create(name="plain", provider_kind="scripted", model_id="plain", supports_thinking=False, supports_images=False)
    ModelConfig.objects.create(name="keyless", provider_kind="anthropic", model_id="x", api_key_env="TEST_NO_SUCH_KEY")
    client = client_for("owner")
    url = f"/api/sessions/{tree.session_id}/prompt/"
    image = [{"data": "AAAA", "mimeType": "image/png"}]
    assert_error(client.post(url, {"text": "hi", "thinkingLevel": "extreme"}, format="json"), 400, "invalid", "thinkingLevel")
    assert_error(client.post(url, {"text": "hi", "model": "plain", "thinkingLevel": "high"}, format="json"), 400, "invalid", "thinkingLevel")
    assert_error(client.post(url, {"text": "hi", "model": "plain", "images": image}, format="json"), 400, "invalid", "images")
    error = assert_error(client.post(url, {"text": "hi", "model": "keyless"}, format="json"), 400, "invalid", "model")
    assert "TEST_NO_SUCH_KEY" in error["message"]
    assert not AgentRun.objects.exists()
    types = [e["type"] for e in get_provider("file").list_entries(tree.session_id)]
    assert types.count("thinking_level_change") == 1  # the session's first one only


def test_a_thinking_level_is_written_to_the_path_before_the_prompt_when_it_changes(tree, owner):
    provider = get_provider("file")
    sid = tree.session_id
    outcome = session_prompt(session_id=sid, text="think harder", actor=owner, thinking_level="high", model_name="scripted-demo", dispatch=False)
    assert outcome.run.model_name == "scripted-demo"
    assert provider.build_context(sid).thinking_level == "high"
    run_now(outcome.run)
    levels = [e for e in provider.list_entries(sid) if e["type"] == "thinking_level_change"]
    assert [e["thinkingLevel"] for e in levels][-1] == "high"
    # The same level again writes nothing.
    before = len(provider.list_entries(sid))
    run_now(session_prompt(session_id=sid, text="again", actor=owner, thinking_level="high", dispatch=False).run)
    added = provider.list_entries(sid)[before:]
    assert [e["message"]["role"] for e in added] == ["user", "assistant"]


# --------------------------------------------------------------------------- search


def test_search_finds_titles_and_message_text_of_both_stores_and_only_yours(client_for, tree, owner, outsider, agent):
    session_rename(session_id=tree.session_id, title="Garden planning", actor=owner)
    mysql_agent = agent
    mysql_agent.session_provider = "mysql"
    mysql_agent.save()
    rows = session_start(agent=mysql_agent, user=owner)
    rows_provider = get_provider("mysql")
    rows_provider.append_message(rows.session_id, user_message("How do I prune a Quince tree?"))
    rows_provider.append_message(rows.session_id, assistant_message("Prune it in late winter."))
    theirs = session_start(agent=mysql_agent, user=outsider)
    get_provider("mysql").append_message(theirs.session_id, user_message("quince jam"))
    client = client_for("owner")

    def ids(q):
        response = client.get("/api/sessions/search/", {"q": q})
        assert response.status_code == 200, response.content
        return response.json()["results"]

    title = ids("garden")
    assert [(h["session"]["sessionId"], h["match"]) for h in title] == [(tree.session_id, "title")]
    content = ids("QUINCE")
    assert [(h["session"]["sessionId"], h["match"]) for h in content] == [(rows.session_id, "content")]
    assert "Quince tree" in content[0]["snippet"] and content[0]["entryId"]
    in_file = ids("another way")  # the file store: build_tree's third user message
    assert [(h["session"]["sessionId"], h["entryId"]) for h in in_file] == [(tree.session_id, tree.ids["u3"])]
    assert ids("role") == []  # JSON keys of the stored entries are not text
    assert ids("nothing like this") == []
    assert_error(client.get("/api/sessions/search/"), 400, "invalid", "q")
    assert_error(client.get("/api/sessions/search/", {"q": "   "}), 400, "invalid", "q")
    assert_error(client.get("/api/sessions/search/", {"q": "x" * 201}), 400, "invalid", "q")
    assert_error(client.get("/api/sessions/search/", {"q": "x", "status": "gone"}), 400, "invalid", "status")
    assert_error(client_for("anonymous").get("/api/sessions/search/", {"q": "x"}), 401, "not_authenticated")


# --------------------------------------------------------------------------- forks and titles


def test_a_fork_is_named_after_its_parent(client_for, tree, owner):
    session_rename(session_id=tree.session_id, title="Trees", actor=owner)
    response = client_for("owner").post(f"/api/sessions/{tree.session_id}/fork/", {"entryId": tree.ids["a1"]}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["title"] == "Trees (fork)"
    fork = get_provider("file").get_session(response.json()["sessionId"])
    assert fork.title == "Trees (fork)"
    # An untitled session's fork stays untitled (no "(fork)" of nothing).
    other = session_start(agent=tree_agent(), user=owner)
    first = get_provider("file").append_message(other.session_id, user_message("q"))
    assert session_fork(session_id=other.session_id, entry_id=first["id"], actor=owner).title == ""


def tree_agent():
    from runtime.models import Agent

    return Agent.objects.get(name="default")


@pytest.mark.auto_titles
def test_after_the_first_answer_the_session_gets_a_title_once(owner, agent, settings):
    settings.NETA_TITLE_MODEL = ""
    provider = get_provider("file")
    sid = session_start(agent=agent, user=owner).session_id
    run = session_prompt(session_id=sid, text="how   do branches\nwork in a session tree?", actor=owner, dispatch=False).run
    assert run_now(run).status == "completed"
    meta = provider.get_session(sid)
    assert meta.title == "How do branches work in a"
    infos = [e for e in provider.list_entries(sid) if e["type"] == "session_info"]
    assert [e["name"] for e in infos] == ["How do branches work in a"]
    assert meta.leaf_entry_id == infos[0]["id"]  # written like a rename: at the leaf
    run_now(session_prompt(session_id=sid, text="and another thing", actor=owner, dispatch=False).run)
    assert [e["name"] for e in provider.list_entries(sid) if e["type"] == "session_info"] == ["How do branches work in a"]


@pytest.mark.auto_titles
def test_a_failing_title_model_is_logged_and_the_run_still_completes(owner, agent, settings, caplog):
    ModelConfig.objects.create(name="broken-titles", provider_kind="anthropic", model_id="x", api_key_env="TEST_NO_SUCH_KEY")
    settings.NETA_TITLE_MODEL = "broken-titles"
    sid = session_start(agent=agent, user=owner).session_id
    with caplog.at_level(logging.ERROR, logger="runtime.runs.titles"):
        finished = run_now(session_prompt(session_id=sid, text="hello", actor=owner, dispatch=False).run)
    assert finished.status == "completed", finished.error
    assert get_provider("file").get_session(sid).title == ""
    assert "writing the session title failed" in caplog.text


def test_regenerate_on_the_mysql_store_too(owner, agent):
    agent.session_provider = "mysql"
    agent.save()
    provider = get_provider("mysql")
    sid = session_start(agent=agent, user=owner).session_id
    u1 = provider.append_message(sid, user_message("a question"))["id"]
    a1 = provider.append_message(sid, assistant_message("an answer"))["id"]
    provider.append_message(sid, user_message("a follow-up"))
    finished = run_now(session_regenerate(session_id=sid, entry_id=u1, actor=owner, dispatch=False))
    assert finished.status == "completed", finished.error
    kids = children(provider, sid, u1)
    assert kids[0] == a1 and len(kids) == 2
    assert provider.get_session(sid).leaf_entry_id == kids[1]
    assert [e["message"]["role"] for e in provider.get_active_path(sid) if e["type"] == "message"] == ["user", "assistant"]
