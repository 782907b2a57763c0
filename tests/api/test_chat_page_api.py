"""What the chat page added to the API: documents in prompts, continue a cut answer,
feedback, share links, pins, the Markdown export, queued inputs and custom instructions —
each with its 4xx answers for bad input (nothing written)."""

from __future__ import annotations

import base64

import pytest

from runtime.models import AgentRun, RunInput, SessionShare
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from sessions_tree.providers import get_provider
from tests.support.builders import assert_error
from tests.support.documents import tiny_pdf
from tests.support.entries import assistant_message

pytestmark = pytest.mark.django_db


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def url(sid: str, rest: str) -> str:
    return f"/api/sessions/{sid}/{rest}"


def entries(sid):
    return get_provider("file").list_entries(sid)


# --------------------------------------------------------------------------- documents


def test_a_prompt_carries_documents_as_wrapped_text_blocks(tree, owner, client_for):
    client = client_for("owner")
    before = len(entries(tree.session_id))
    body = {"text": "summarize these", "documents": [
        {"name": "notes.md", "data": b64(b"# Notes\nprune in March\n"), "mimeType": "text/markdown"},
        {"name": "figures.pdf", "data": b64(tiny_pdf("Quarterly figures: 42 apples"))},
    ]}  # fmt: skip
    response = client.post(url(tree.session_id, "prompt/"), body, format="json")
    assert response.status_code == 202, response.content
    run = AgentRun.objects.get(run_id=response.json()["run"]["runId"])
    assert execute_run(run.run_id, sink=InMemorySink()).status == "completed"
    user = next(e for e in entries(tree.session_id)[before:] if e["type"] == "message" and e["message"]["role"] == "user")
    content = user["message"]["content"]
    assert content[0] == {"type": "text", "text": "summarize these"}
    assert content[1]["text"].startswith('<document name="notes.md" type="text/markdown" chars="23">\n# Notes\nprune in March\n')
    assert content[1]["text"].endswith("\n</document>")
    assert content[2]["text"].startswith('<document name="figures.pdf" type="application/pdf"') and 'pages="1"' in content[2]["text"]
    assert "Quarterly figures: 42 apples" in content[2]["text"]


@pytest.mark.parametrize(
    ("document", "field", "says"),
    [
        ({"name": "x.bin", "data": b64(b"\x00\x01\x02binary")}, "documents[0]", "not a text file"),
        ({"name": "latin.txt", "data": b64("café".encode("latin-1"))}, "documents[0]", "not UTF-8"),
        ({"name": "scan.pdf", "data": b64(b"%PDF-1.4 garbage")}, "documents[0]", "could not be read as a PDF"),
        ({"name": "x.txt", "data": "not base64!"}, "documents[0]", "not base64"),
        ({"name": "", "data": b64(b"x")}, "documents[0].name", None),
        ({"name": "big.txt", "data": b64(b"a" * 200_001)}, "documents[0]", "at most 200,000"),
        ({"name": "empty.txt", "data": b64(b"   ")}, "documents[0]", "is empty"),
        ({"data": b64(b"hi")}, "documents[0].name", None),
    ],
)
def test_bad_documents_are_refused_with_the_reason_and_nothing_is_written(tree, client_for, document, field, says):
    client = client_for("owner")
    before = entries(tree.session_id)
    runs = AgentRun.objects.count()
    response = client.post(url(tree.session_id, "prompt/"), {"text": "read this", "documents": [document]}, format="json")
    error = assert_error(response, 400, "invalid", field)
    if says:
        assert says in error["message"], error
    assert entries(tree.session_id) == before and AgentRun.objects.count() == runs


def test_too_many_documents_are_refused(tree, client_for):
    doc = {"name": "a.txt", "data": b64(b"hello")}
    response = client_for("owner").post(url(tree.session_id, "prompt/"), {"text": "x", "documents": [doc] * 9}, format="json")
    assert_error(response, 400, "invalid", "documents")


# --------------------------------------------------------------------------- continue


def test_continue_goes_on_from_an_answer_cut_at_the_limit(tree, owner, client_for):
    provider = get_provider("file")
    cut = provider.append_message(tree.session_id, {**assistant_message("half of it"), "stopReason": "length"})
    client = client_for("owner")
    assert_error(client.post(url(tree.session_id, "continue/"), {"entryId": tree.ids["a3"]}, format="json"), 400, "invalid", "entryId")
    assert_error(client.post(url(tree.session_id, "continue/"), {"entryId": "nope"}, format="json"), 400, "entry_not_found", "entryId")
    response = client.post(url(tree.session_id, "continue/"), {"entryId": cut["id"]}, format="json")
    assert response.status_code == 202, response.content
    run = AgentRun.objects.get(run_id=response.json()["run"]["runId"])
    ask = next(e for e in entries(tree.session_id) if e["type"] == "custom_message")
    assert ask["parentId"] == cut["id"] and ask["display"] is False and ask["customType"] == "neta.continue"
    assert run.prompt_entry_id == ask["id"]
    assert execute_run(run.run_id, sink=InMemorySink()).status == "completed"
    answer = entries(tree.session_id)[-1]
    assert answer["parentId"] == ask["id"] and answer["message"]["role"] == "assistant"
    # The request to go on is in the context (Pi's custom message: the user's turn for the model).
    context = provider.build_context(tree.session_id)
    assert any("cut off at the output limit" in str(m.get("content")) for m in context.messages if m.get("role") == "custom")


# --------------------------------------------------------------------------- feedback


def test_feedback_is_a_custom_entry_the_model_never_reads(tree, client_for):
    client = client_for("owner")
    sid = tree.session_id
    response = client.post(url(sid, "feedback/"), {"entryId": tree.ids["a3"], "rating": "down", "note": "too terse"}, format="json")
    assert response.status_code == 201, response.content
    entry = response.json()["entry"]
    assert entry["type"] == "custom" and entry["customType"] == "neta.feedback"
    assert entry["data"] == {"entryId": tree.ids["a3"], "rating": "down", "note": "too terse", "by": "owner"}
    context = get_provider("file").build_context(sid)
    assert "too terse" not in str(context.messages)
    before = entries(sid)
    assert_error(client.post(url(sid, "feedback/"), {"entryId": tree.ids["u1"], "rating": "up"}, format="json"), 400, "invalid", "entryId")
    assert_error(client.post(url(sid, "feedback/"), {"entryId": tree.ids["a3"], "rating": "meh"}, format="json"), 400, "invalid", "rating")
    assert_error(client.post(url(sid, "feedback/"), {"entryId": tree.ids["a3"], "rating": "up", "note": "x" * 1001}, format="json"), 400, "invalid", "note")
    assert_error(client_for("outsider").post(url(sid, "feedback/"), {"entryId": tree.ids["a3"], "rating": "up"}, format="json"), 404, "session_not_found")
    assert entries(sid) == before


# --------------------------------------------------------------------------- shares, pins, export


def test_a_share_link_shows_the_path_as_shared_without_login_until_revoked(tree, owner, client_for, client):
    api = client_for("owner")
    sid = tree.session_id
    made = api.post(url(sid, "shares/"), {}, format="json")
    assert made.status_code == 201, made.content
    link = made.json()
    page = client.get(link["url"])  # a client with no login
    assert page.status_code == 200 and page["X-Robots-Tag"] == "noindex, nofollow"
    assert b"another way" in page.content and b"second question" not in page.content  # the active path only
    get_provider("file").append_message(sid, assistant_message("said after sharing"))
    assert b"said after sharing" not in client.get(link["url"]).content
    assert client_for("outsider").get(url(sid, "shares/")).status_code == 404
    assert api.get(url(sid, "shares/")).json()["results"][0]["views"] == 2
    revoked = api.delete(url(sid, f"shares/{link['id']}/"))
    assert revoked.status_code == 200 and revoked.json()["revokedAt"]
    assert client.get(link["url"]).status_code == 404
    assert client.get("/share/not-a-token/").status_code == 404
    assert_error(api.delete(url(sid, "shares/999999/")), 404, "not_found")
    assert SessionShare.objects.filter(session__session_id=sid).count() == 1


def test_pins(tree, owner, client_for):
    api = client_for("owner")
    assert api.put(url(tree.session_id, "pin/")).json() == {"pinned": True}
    assert api.put(url(tree.session_id, "pin/")).json() == {"pinned": True}  # twice is once
    assert api.delete(url(tree.session_id, "pin/")).json() == {"pinned": False}
    assert_error(client_for("outsider").put(url(tree.session_id, "pin/")), 404, "session_not_found")


def test_markdown_export_of_the_active_path(tree, client_for):
    response = client_for("owner").get(url(tree.session_id, "export/?as=markdown"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert "## You\n\nfirst question" in text and "another way" in text and "second question" not in text
    assert_error(client_for("owner").get(url(tree.session_id, "export/?as=pdf")), 400, "invalid", "as")


# --------------------------------------------------------------------------- queued inputs, settings


def test_queued_inputs_of_the_active_run(tree, owner, client_for):
    run = session_prompt(session_id=tree.session_id, text="first", actor=owner, dispatch=False).run
    session_prompt(session_id=tree.session_id, text="and then this", actor=owner, dispatch=False)
    body = client_for("owner").get(url(tree.session_id, "queued/")).json()
    assert [(i["text"], i["mode"]) for i in body["inputs"]] == [("and then this", "follow_up")]
    RunInput.objects.filter(run=run).update(consumed=True)
    assert client_for("owner").get(url(tree.session_id, "queued/")).json() == {"inputs": []}


def test_custom_instructions_join_the_system_prompt(tree, owner, client_for, monkeypatch):
    api = client_for("owner")
    assert api.get("/api/me/settings/").json()["customInstructions"] == ""
    saved = api.put("/api/me/settings/", {"customInstructions": "  Answer briefly.  "}, format="json")
    assert saved.status_code == 200 and saved.json()["customInstructions"] == "Answer briefly."
    assert_error(api.put("/api/me/settings/", {"customInstructions": "x" * 4001}, format="json"), 400, "invalid", "customInstructions")
    assert_error(api.put("/api/me/settings/", {"customInstructions": 5}, format="json"), 400, "invalid", "customInstructions")
    assert api.get("/api/me/settings/").json()["customInstructions"] == "Answer briefly."
    from runtime.runs import turn as turn_module

    prompts = []
    real = turn_module.build_system_prompt
    monkeypatch.setattr(turn_module, "build_system_prompt", lambda *a, **k: prompts.append(real(*a, **k)) or prompts[-1])
    run = session_prompt(session_id=tree.session_id, text="hi", actor=owner, dispatch=False).run
    assert execute_run(run.run_id, sink=InMemorySink()).status == "completed"
    assert "The user's custom instructions:\nAnswer briefly." in prompts[0]
