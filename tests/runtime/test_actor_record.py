"""Who did it: every write service takes ``actor=``, and what it records names that user —
staff acting on another user's session is recorded as staff, never as the owner."""

from __future__ import annotations

import io
import json
import logging

import pytest

from runtime.models import AgentRun, RunInput
from runtime.runs.prompts import run_abort, session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import (
    session_compact,
    session_create,
    session_delete,
    session_fork,
    session_import,
    session_label,
    session_rename,
    session_set_agent,
    session_set_status,
    session_start,
    session_switch_leaf,
)
from sessions_tree.acting import acting_as, current_actor_id
from sessions_tree.models import AgentSession, SessionEvent
from sessions_tree.providers import get_provider
from tests.support.rules import rules, summary_rule

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(make_agent):
    return make_agent(rules(summary_rule(), default={"reply": [{"text": "echo: {{user}}"}]}))


@pytest.fixture
def owned(agent, owner):
    """The owner's session with one finished turn (the owner prompted it)."""
    meta = session_start(agent=agent, user=owner)
    run = session_prompt(session_id=meta.session_id, text="first", actor=owner, dispatch=False).run
    execute_run(run.run_id)
    return AgentSession.objects.get(pk=meta.pk)


def revision(meta) -> int:
    return AgentSession.objects.get(pk=meta.pk).revision


def actors_since(meta, since: int) -> list[tuple[str, int | None]]:
    return list(
        SessionEvent.objects.filter(session_id=meta.pk, revision__gt=since).order_by("revision").values_list("type", "actor_id")
    )


def assert_recorded_as(meta, since, user):
    recorded = actors_since(meta, since)
    assert recorded, "the write recorded no event"
    assert {actor for _, actor in recorded} == {user.pk}, recorded


def test_the_owner_s_own_writes_name_the_owner(owned, owner):
    events = actors_since(owned, 0)
    assert events and {actor for _, actor in events} == {owner.pk}  # start, the prompt's entry, the reply


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda m, a: session_rename(session_id=m.session_id, title="Renamed by staff", actor=a), id="rename"),
        pytest.param(lambda m, a: session_set_status(session_id=m.session_id, status="archived", actor=a), id="status"),
        pytest.param(lambda m, a: session_label(session_id=m.session_id, entry_id=m.leaf_entry_id, label="look", actor=a), id="label"),
        pytest.param(lambda m, a: session_switch_leaf(session_id=m.session_id, entry_id=None, actor=a), id="switch-leaf"),
        pytest.param(
            lambda m, a: session_switch_leaf(session_id=m.session_id, entry_id=m.root_entry_id, actor=a, summarize=True),
            id="switch-leaf-with-summary",
        ),
        pytest.param(lambda m, a: session_compact(session_id=m.session_id, actor=a), id="compact"),
    ],
)
def test_staff_writing_to_the_owner_s_session_is_recorded_as_staff(owned, staff, write):
    before = revision(owned)
    write(AgentSession.objects.get(pk=owned.pk), staff)
    assert_recorded_as(owned, before, staff)


def test_set_agent_is_recorded_as_staff(owned, staff, make_agent):
    make_agent(rules(), name="second")
    before = revision(owned)
    session_set_agent(session_id=owned.session_id, agent_name="second", actor=staff)
    assert_recorded_as(owned, before, staff)


def test_a_prompt_by_staff_and_the_run_it_starts_are_recorded_as_staff(owned, staff):
    before = revision(owned)
    run = session_prompt(session_id=owned.session_id, text="staff asks", actor=staff, dispatch=False).run
    assert run.user_id == staff.pk
    execute_run(run.run_id)
    assert_recorded_as(owned, before, staff)  # the user entry, the in-flight reply, its finalization


def test_a_follow_up_staff_queues_on_the_owner_s_run_names_staff(owned, owner, staff):
    run = session_prompt(session_id=owned.session_id, text="owner asks", actor=owner, dispatch=False).run
    queued = session_prompt(session_id=owned.session_id, text="staff follows up", actor=staff)
    assert queued.queued_as == "follow_up" and RunInput.objects.get(run=run).user_id == staff.pk
    before = revision(owned)
    execute_run(run.run_id)
    provider = get_provider(owned.provider)
    by_text = {}
    for event in SessionEvent.objects.filter(session_id=owned.pk, revision__gt=before, type="session_entry_added"):
        entry = provider.get_entry(owned.session_id, json.loads(event.payload)["entry"]["id"])
        message = entry.get("message") or {}
        if message.get("role") == "user":
            by_text[message["content"][0]["text"]] = event.actor_id
    assert by_text == {"owner asks": owner.pk, "staff follows up": staff.pk}


def test_continuing_from_an_entry_moves_the_leaf_as_the_prompter(owned, staff):
    before = revision(owned)
    session_prompt(session_id=owned.session_id, text="again", actor=staff, from_entry_id=owned.root_entry_id, dispatch=False)
    recorded = actors_since(owned, before)
    assert ("session_leaf_changed", staff.pk) in recorded and {a for _, a in recorded} == {staff.pk}


def test_fork_and_import_name_the_actor_as_owner_and_author(owned, staff, agent, tmp_path):
    fork = session_fork(session_id=owned.session_id, entry_id=owned.leaf_entry_id, actor=staff)
    assert fork.user_id == staff.pk  # a new session has no events yet: its owner is the record
    assert {actor for _, actor in actors_since(fork, 0)} <= {staff.pk}
    path = tmp_path / "exported.jsonl"
    path.write_text("".join(get_provider(owned.provider).export_lines(owned.session_id)))
    imported = session_import(path=path, actor=staff, agent_name=agent.name)
    assert imported.user_id == staff.pk
    assert {actor for _, actor in actors_since(imported, 0)} <= {staff.pk}
    created = session_create(actor=staff, agent_name=agent.name, title="staff's own")
    assert created.user_id == staff.pk and {actor for _, actor in actors_since(created, 0)} == {staff.pk}


def test_the_command_line_acts_as_nobody(owned):
    before = revision(owned)
    session_rename(session_id=owned.session_id, title="from a shell", actor=None)
    recorded = actors_since(owned, before)
    assert recorded and {actor for _, actor in recorded} == {None}


def test_a_delete_by_staff_is_written_to_the_audit_log(owned, owner, staff, caplog):
    with caplog.at_level(logging.INFO, logger="runtime.sessions.audit"):
        session_delete(session_id=owned.session_id, actor=staff)
    (record,) = [r for r in caplog.records if r.name == "runtime.sessions.audit"]
    assert record.actor_id == staff.pk and record.owner_id == owner.pk and record.session_id == owned.session_id
    assert f"deleted by user {staff.pk} (staff)" in record.getMessage()
    assert not AgentSession.objects.filter(pk=owned.pk).exists()


def test_run_abort_takes_the_actor(owned, staff):
    run = session_prompt(session_id=owned.session_id, text="queued", actor=staff, dispatch=False).run
    aborted = run_abort(session_id=owned.session_id, actor=staff)
    assert aborted.pk == run.pk and AgentRun.objects.get(pk=run.pk).status == "aborted"


def test_acting_as_nests_and_refuses_what_is_not_a_user(owner, staff):
    assert current_actor_id() is None
    with acting_as(owner):
        with acting_as(staff):
            assert current_actor_id() == staff.pk
        assert current_actor_id() == owner.pk
        with acting_as(user_id=None):
            assert current_actor_id() is None
    assert current_actor_id() is None
    with pytest.raises(TypeError):
        with acting_as("staff"):
            pass


def test_commands_act_as_the_user_named_by_as_user(owned, staff):
    from django.core.management import CommandError, call_command

    before = revision(owned)
    call_command("session_switch", owned.session_id, "@root", as_user="staff", stdout=io.StringIO())
    assert_recorded_as(owned, before, staff)
    mark = revision(owned)
    call_command("session_switch", owned.session_id, owned.leaf_entry_id, stdout=io.StringIO())
    assert {actor for _, actor in actors_since(owned, mark)} == {None}
    untouched = revision(owned)
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("session_compact", owned.session_id, as_user="nobody")
    assert revision(owned) == untouched  # refused before anything was written
