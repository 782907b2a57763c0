"""How many database queries one turn costs (docs/runtime.md, "What a turn costs the database").

A 2-call turn of the scripted model (one tool call, then the answer), on the file
and on the mysql provider, counted on the turn's own connection (``execute_run``;
the watcher thread's time-driven heartbeats are not part of it). Counting queries
is behaviour, not timing: a change that adds a query to every turn fails here.
The queries are printed (``-s``) so a failure shows what they are.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime.models import RunStatus
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)

TWO_CALLS = rules(
    default={"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "done"}]]},
)

# Transaction control is not a query of its own (SQLite logs BEGIN/COMMIT, MySQL does not).
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")

# What the turn costs, within the target (20). Where each query goes (SQLite):
# the claim (the run with its agent, model and the tool catalog's version; its UPDATE),
# the session row once; per tree write the row's conditional UPDATE, the event row (mysql:
# the entry rows too) and, at a reply's opening, the run's UPDATE carrying its bookkeeping
# (runs/turn.py::RunBook); one read of steers and the cancel flag after the tool round;
# the completing transaction (the queued-input check, the run's UPDATE); when the run stops
# executing, its trace: one INSERT of its model calls, one of its tool calls (runs/traces.py;
# the blobs of its system prompt and tools only the first time this process sends them).
TURN_QUERIES = {"file": 18, "mysql": 22}
TARGET = 22


def count_turn(driver) -> tuple[list[str], int]:
    driver.prompt("warm up")  # the first turn of a process also loads the agent's catalog rows
    from runtime.runs.prompts import session_prompt
    from runtime.runs.turn import execute_run

    outcome = session_prompt(actor=None, session_id=driver.session_id, text="go", dispatch=False)
    with CaptureQueriesContext(connection) as captured:
        run = execute_run(outcome.run.run_id, sink=driver.sink)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.rounds == 1
    sql = [q["sql"] for q in captured.captured_queries]
    queries = [s for s in sql if not s.upper().startswith(_CONTROL)]
    transactions = sum(1 for s in sql if s.upper().startswith("BEGIN")) if connection.vendor == "sqlite" else -1
    print(f"\n{driver.agent.session_provider}: {len(queries)} queries, {transactions} transactions")
    for text in queries:
        print("   ", text[:150])
    return queries, transactions


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_a_two_call_turn_stays_within_its_query_budget(driver_for, provider):
    driver = driver_for(TWO_CALLS, provider=provider)
    queries, transactions = count_turn(driver)
    assert len(queries) <= TURN_QUERIES[provider]
    # One write per step: the prompt goes with the first reply's in-flight entry, the
    # round's last tool result with the next one's, so a 2-call turn is 4 tree writes
    # (open, finalize, tool result + open, finalize).
    writes = [q for q in queries if q.startswith('INSERT INTO "sessions_tree_sessionevent"')]
    assert len(writes) == 4
    # The session row is read once, when the turn is prepared: each write changes it by a
    # conditional UPDATE on the turn's copy (sessions_tree/providers/base.py::_change), and
    # the lifecycle locks it once, at the finish, by the copy's key (one query on
    # MySQL/MariaDB, none on SQLite, whose IMMEDIATE transaction is the lock:
    # runtime/runs/locks.py::lock_session_key).
    meta_reads = [q for q in queries if q.startswith("SELECT") and 'FROM "sessions_tree_agentsession"' in q]
    assert len(meta_reads) == 1 + (1 if connection.features.has_select_for_update else 0)
    # The catalog (governance rows, skills) is what the process keeps at its version.
    assert not [q for q in queries if "toolcatalog_toolconfig" in q or "skills_registry_skillresource" in q]
    run_updates = [q for q in queries if q.startswith('UPDATE "runtime_agentrun"')]
    assert len(run_updates) == 4  # claim, 2 x opened (with the usage and rounds before it), finish
    if transactions >= 0:
        assert transactions <= 5  # the claim is one UPDATE in autocommit, so are the trace's INSERTs
    assert len(queries) <= TARGET


def test_a_turns_streaming_events_take_the_runs_row_key_without_a_lookup(driver_for):
    """The publisher tags each streaming event with the key of the session row it belongs
    to (``runtime.realtime.groups.stream_session_key``). A run's turn names its own row, so
    its events need no lookup, even with the key cache expired before every event; only
    the claim's ``running`` announcement (sent before the turn opens its row) looks it up."""
    from runtime.realtime import groups
    from sessions_tree.models import AgentSession

    driver = driver_for(TWO_CALLS, provider="file")
    driver.prompt("warm up")
    row = AgentSession.objects.get(session_id=driver.session_id).pk
    seen: list[tuple[str, int | None]] = []

    class KeyedSink:
        def emit(self, session_id, event):
            groups.forget_stream_key(session_id)  # as if the cache had just expired
            seen.append((event["type"], groups.stream_session_key(session_id)))

    from runtime.runs.prompts import session_prompt
    from runtime.runs.turn import execute_run

    outcome = session_prompt(actor=None, session_id=driver.session_id, text="go", dispatch=False)
    with CaptureQueriesContext(connection) as captured:
        run = execute_run(outcome.run.run_id, sink=KeyedSink())
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(seen) > 5 and {key for _, key in seen} == {row}
    key_lookup = 'SELECT "sessions_tree_agentsession"."id" AS "pk" FROM'  # groups.session_key
    lookups = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(key_lookup)]
    assert len(lookups) == 1, lookups  # the claim's run_state; before: one per event


def test_a_prompt_writes_its_run_once_and_tags_its_run_state_without_a_lookup(driver_for):
    """The prompt's side of a turn (the API view's service call, the session row already
    read by its access check): the run is inserted with its first submission (no UPDATE
    after it), the session's stale-run check reads its active runs once (ask_user
    questions included), and the ``queued`` run_state names the locked row without a
    lookup."""
    import time

    from runtime.realtime import groups
    from runtime.runs.process import this_process
    from runtime.runs.prompts import session_prompt
    from sessions_tree.models import AgentSession

    driver = driver_for(TWO_CALLS, provider="file")
    driver.prompt("warm up")
    meta = AgentSession.objects.get(session_id=driver.session_id)
    groups.forget_stream_key(driver.session_id)
    with CaptureQueriesContext(connection) as captured:
        outcome = session_prompt(actor=None, session_id=driver.session_id, text="go", meta=meta)
    queries = [q["sql"] for q in captured.captured_queries if not q["sql"].upper().startswith(_CONTROL)]
    print("\nprompt:", len(queries), "queries")
    for text in queries:
        print("   ", text[:150])
    assert len([q for q in queries if q.startswith('INSERT INTO "runtime_agentrun"')]) == 1
    assert not [q for q in queries if q.startswith('UPDATE "runtime_agentrun"')]  # was: the submission's
    assert not [q for q in queries if q.startswith('SELECT "sessions_tree_agentsession"."id" AS "pk" FROM')]
    run_reads = [q for q in queries if q.startswith("SELECT") and 'FROM "runtime_agentrun"' in q]
    assert len(run_reads) == 2  # the stale-run check, the active run under the session's lock
    assert len(queries) <= 5  # the agent, the stale-run check, the lock, the active run, the run
    run = outcome.run
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status == RunStatus.COMPLETED:
            break
        time.sleep(0.05)
    assert run.status == RunStatus.COMPLETED, run.error
    owner = this_process()
    assert (run.backend, run.submissions, run.host, run.pid) == ("inline", 1, owner["host"], owner["pid"])
    assert run.submitted_at is not None and run.submitted_at <= run.started_at


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_a_new_session_writes_its_first_entries_and_title_without_reading_its_row(make_agent, provider, owner):
    """``POST /api/sessions/`` with a title (``session_create``): the row is made, then the
    model, the thinking level and the title are written on the copy in hand, each a
    conditional UPDATE of what it changed; the row is never read back (only the id's
    existence is checked before the INSERT). What comes back is the row as stored."""
    from runtime.sessions.services import session_create
    from sessions_tree.models import AgentSession

    agent = make_agent(TWO_CALLS, provider=provider)
    with CaptureQueriesContext(connection) as captured:
        meta = session_create(actor=owner, agent_name=agent.name, title="  Named  ")
    sql = [q["sql"] for q in captured.captured_queries]
    for text in sql:
        print("   ", text[:150])
    meta_reads = [s for s in sql if s.startswith("SELECT") and 'FROM "sessions_tree_agentsession"' in s]
    assert len(meta_reads) == 1 and "LIMIT 1" in meta_reads[0], meta_reads  # the id's existence check
    # One UPDATE a write, and the store's own after the INSERT (the file's path; its size).
    assert len([s for s in sql if s.startswith('UPDATE "sessions_tree_agentsession"')]) == 4
    stored = AgentSession.objects.get(pk=meta.pk)
    for field in ("title", "revision", "leaf_entry_id", "entry_count", "message_count", "last_seq", "updated_at"):
        assert getattr(meta, field) == getattr(stored, field), field
    assert stored.title == "Named" and stored.entry_count == 3
