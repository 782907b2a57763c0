"""DELETE racing a prompt on an idle session.

Both requests are fired at once, many times. Every race must end one of two
ways, and nothing else:

- the prompt won: 202, its run exists (and runs), the delete answers 409
  because that run is active; or
- the delete won: 204 (session, file, runs gone), the prompt answers 404
  ``session_not_found``.

Never a 500, never an acknowledged prompt whose run is gone. The reply is a long
(abortable) pause, so a prompt that won still has its run active when the
delete arrives; after each race the run is aborted and the session deleted.

On SQLite the two requests go through Django's test client on two threads
(two connections to the test database file); on MariaDB through two Daphne
servers of a real deployment (tests/support/deployment.py), i.e. two processes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.db import connections
from rest_framework.test import APIClient

from runtime.models import ACTIVE_RUN_STATUSES, AgentRun, RunInput
from runtime.runs.prompts import run_abort
from runtime.sessions.services import session_start
from sessions_tree.models import AgentSession, SessionEntry
from tests.support.builders import default_agent
from tests.support.deployment import Deployment
from tests.support.rules import TEST_RULES
from tests.support.services import require_mariadb_and_redis

RACES = 30
LONG_REPLY = {"match": {"contains": "race"}, "reply": {"steps": [{"pause_ms": 60_000}, {"text": "late"}]}}
RULES = {**TEST_RULES, "rules": [LONG_REPLY, *TEST_RULES["rules"]]}


def _fire_together(*calls):
    """Run each call on its own thread, released at the same moment; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def work(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def _wait(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------------- SQLite, in process


@pytest.fixture
def race_agent(transactional_db, sessions_dir, tmp_path, settings):
    from runtime.models import ModelConfig

    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    settings.NETA_TASK_BACKEND = "inline"
    agent = default_agent()
    ModelConfig.objects.filter(pk=agent.model_id).update(options={"rules": RULES})
    return agent


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_delete_racing_a_prompt_on_sqlite(race_agent, owner, provider):
    from runtime.models import Agent

    Agent.objects.filter(pk=race_agent.pk).update(session_provider=provider)
    race_agent.refresh_from_db()
    deleter, prompter = APIClient(), APIClient()
    deleter.force_login(owner)
    prompter.force_login(owner)
    outcomes = {"prompt won": 0, "delete won": 0}
    for i in range(RACES):
        meta = session_start(agent=race_agent, user=owner)
        sid, session_file = meta.session_id, meta.session_file
        deleted, prompted = _fire_together(
            lambda: deleter.delete(f"/api/sessions/{sid}/"),
            lambda: prompter.post(f"/api/sessions/{sid}/prompt/", {"text": f"race {i}"}, format="json"),
        )
        assert not isinstance(deleted, BaseException), deleted
        assert not isinstance(prompted, BaseException), prompted
        pair = (deleted.status_code, prompted.status_code)
        if pair == (409, 202):
            outcomes["prompt won"] += 1
            run_id = prompted.json()["run"]["runId"]
            run = AgentRun.objects.get(run_id=run_id)  # the acknowledged prompt has its run
            assert run.session_id == sid and run.prompt == f"race {i}"
            assert deleted.json()["error"]["code"] == "session_busy"
            assert AgentSession.objects.filter(session_id=sid).exists()
            run_abort(actor=None, run=run)
            _wait(lambda: AgentRun.objects.get(run_id=run_id).status not in ACTIVE_RUN_STATUSES, "the run to stop")
            # Now idle: the delete goes through and takes the runs with it.
            assert deleter.delete(f"/api/sessions/{sid}/").status_code == 204
        elif pair == (204, 404):
            outcomes["delete won"] += 1
            assert prompted.json()["error"]["code"] == "session_not_found"
        else:
            pytest.fail(f"race {i}: delete {deleted.status_code} {deleted.content[:300]!r}, prompt {prompted.status_code} {prompted.content[:300]!r}")
        assert not AgentSession.objects.filter(session_id=sid).exists()
        assert not AgentRun.objects.filter(session_id=sid).exists()
        assert not SessionEntry.objects.filter(session__session_id=sid).exists()
        if session_file:
            assert not Path(session_file).exists()
    assert sum(outcomes.values()) == RACES
    assert not RunInput.objects.exists()
    print(f"{provider} on SQLite: {outcomes}")


# --------------------------------------------------------------------------- MariaDB, two servers


@pytest.fixture(scope="module")
def mariadb_cluster(tmp_path_factory):
    """Two servers of the inline backend on MariaDB and Redis, for this module's races alone."""
    require_mariadb_and_redis()
    deployment = Deployment(tmp_path_factory.mktemp("race-cluster"), servers=2, database="mysql", redis=True, rules=RULES)
    with deployment as running:
        yield running


def _mariadb_rows(cluster: Deployment, sql: str, args) -> list:
    return cluster.sql(sql, *args)


@pytest.mark.slow
@pytest.mark.mariadb
@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_delete_racing_a_prompt_on_mariadb(mariadb_cluster, provider):
    cluster = mariadb_cluster
    outcomes = {"prompt won": 0, "delete won": 0}
    _mariadb_rows(cluster, "UPDATE runtime_agent SET session_provider = %s WHERE name = 'default'", [provider])
    for i in range(RACES):
        status, session = cluster.http(0, "post", "/api/sessions/", {})
        assert status == 201, session
        sid = session["sessionId"]
        (d_status, d_body), (p_status, p_body) = _fire_together(
            lambda: cluster.http(0, "delete", f"/api/sessions/{sid}/"),
            lambda: cluster.http(1, "post", f"/api/sessions/{sid}/prompt/", {"text": f"race {i}"}),
        )
        if (d_status, p_status) == (409, 202):
            outcomes["prompt won"] += 1
            run_id = p_body["run"]["runId"]
            status, run = cluster.http(1, "get", f"/api/runs/{run_id}/")
            assert status == 200 and run["prompt"] == f"race {i}", run
            assert d_body["error"]["code"] == "session_busy"
            assert cluster.http(1, "post", f"/api/sessions/{sid}/abort/")[0] == 200

            def stopped():
                return cluster.http(1, "get", f"/api/runs/{run_id}/")[1]["status"] not in ACTIVE_RUN_STATUSES

            _wait(stopped, "the run to stop")
            assert cluster.http(0, "delete", f"/api/sessions/{sid}/")[0] == 204
            assert cluster.http(1, "get", f"/api/runs/{run_id}/")[0] == 404
        elif (d_status, p_status) == (204, 404):
            outcomes["delete won"] += 1
            assert p_body["error"]["code"] == "session_not_found", p_body
        else:
            pytest.fail(f"race {i}: delete {d_status} {str(d_body)[:300]}, prompt {p_status} {str(p_body)[:300]}")
        assert not _mariadb_rows(cluster, "SELECT id FROM sessions_tree_agentsession WHERE session_id = %s", [sid])
        assert not _mariadb_rows(cluster, "SELECT id FROM runtime_agentrun WHERE session_id = %s", [sid])
    assert sum(outcomes.values()) == RACES
    assert not _mariadb_rows(cluster, "SELECT id FROM runtime_runinput", [])
    print(f"{provider} on MariaDB: {outcomes}")


# --------------------------------------------------------------------------- the rules, one at a time


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_delete_takes_runs_and_queued_inputs_with_it(make_agent, provider):
    from runtime.runs.prompts import session_prompt
    from runtime.runs.turn import execute_run
    from runtime.sessions.services import session_delete
    from tests.support.rules import rules

    agent = make_agent(rules(), provider=provider)
    meta = session_start(agent=agent)
    sid = meta.session_id
    first = session_prompt(actor=None, session_id=sid, text="one", dispatch=False).run
    session_prompt(actor=None, session_id=sid, text="queued behind it", dispatch=False)  # a follow-up on the queued run
    assert RunInput.objects.filter(run=first).count() == 1
    execute_run(first.run_id)
    assert not AgentRun.objects.filter(session_id=sid, status__in=ACTIVE_RUN_STATUSES).exists()
    other = session_start(agent=agent)  # another session's runs stay
    session_prompt(actor=None, session_id=other.session_id, text="elsewhere", dispatch=False)

    session_delete(actor=None, session_id=sid)

    assert not AgentSession.objects.filter(session_id=sid).exists()
    assert not SessionEntry.objects.filter(session__session_id=sid).exists()
    assert not AgentRun.objects.filter(session_id=sid).exists()
    assert not RunInput.objects.filter(run__session_id=sid).exists()
    if provider == "file":
        assert not Path(meta.session_file).exists()
    assert AgentRun.objects.filter(session_id=other.session_id).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_delete_is_refused_while_a_run_is_queued_or_running(make_agent, provider):
    from runtime.runs.prompts import session_prompt
    from runtime.sessions.services import session_delete
    from sessions_tree.errors import SessionBusy
    from tests.support.rules import rules

    agent = make_agent(rules(), provider=provider)
    meta = session_start(agent=agent)
    run = session_prompt(actor=None, session_id=meta.session_id, text="hello", dispatch=False).run
    for status in ("queued", "running"):
        AgentRun.objects.filter(pk=run.pk).update(status=status)
        with pytest.raises(SessionBusy):
            session_delete(actor=None, session_id=meta.session_id)
        assert AgentRun.objects.filter(pk=run.pk).exists()
        assert AgentSession.objects.get(pk=meta.pk).entry_count == meta.entry_count
        if provider == "file":
            assert Path(meta.session_file).exists()


@pytest.mark.django_db(transaction=True)
def test_prompt_to_a_deleted_session_is_not_found_and_leaves_no_run(make_agent):
    from runtime.runs.prompts import session_prompt
    from runtime.sessions.services import session_delete
    from sessions_tree.errors import SessionNotFound
    from tests.support.rules import rules

    meta = session_start(agent=make_agent(rules()))
    session_delete(actor=None, session_id=meta.session_id)
    with pytest.raises(SessionNotFound):
        session_prompt(actor=None, session_id=meta.session_id, text="anyone there?", dispatch=False)
    with pytest.raises(SessionNotFound):
        session_delete(actor=None, session_id=meta.session_id)
    assert not AgentRun.objects.filter(session_id=meta.session_id).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prompt_written", [True, False], ids=["died-mid-stream", "died-before-its-prompt"])
def test_a_run_whose_worker_died_does_not_keep_the_session_from_being_deleted(make_agent, settings, prompt_written):
    """Like a prompt, a delete reaps the session's stale run first (it is lost, not active);
    a prompt the dead run never wrote is not carried into a new run: the session is going."""
    import datetime as dt

    from django.utils import timezone

    from runtime.runs.prompts import session_prompt
    from runtime.sessions.services import session_delete
    from tests.support.rules import rules

    meta = session_start(agent=make_agent(rules()))
    run = session_prompt(actor=None, session_id=meta.session_id, text="hello", dispatch=False).run
    long_ago = timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_STALE_SECONDS + 60)
    AgentRun.objects.filter(pk=run.pk).update(
        status="running", heartbeat_at=long_ago, started_at=long_ago, prompt_entry_id="u0000001" if prompt_written else ""
    )

    session_delete(actor=None, session_id=meta.session_id)

    assert not AgentSession.objects.filter(session_id=meta.session_id).exists()
    assert not AgentRun.objects.filter(session_id=meta.session_id).exists()
