"""No deadlocks by design, on MariaDB: a real Daphne with the inline
backend (real threads) on a MariaDB database, 20 sessions prompting 5 turns each at once
over REST → every run completed, none failed, none stuck.

The same server has ``NETA_TEST_FAULT_AT=finish_deadlock``: the first run to finish meets
a real deadlock (a second connection locks its run row, then waits for the session row
the finish holds; InnoDB rolls the finish back with 1213), and the finish is retried
whole: that run completes too, and the log shows the retry.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.deployment import Deployment
from tests.support.rules import TEST_RULES
from tests.support.services import mariadb_available, require

SESSIONS = 20
TURNS = 5
TERMINAL = ("completed", "failed", "aborted", "lost")


@pytest.fixture
def server(tmp_path_factory):
    require(mariadb_available(), "MariaDB is not reachable on 127.0.0.1:3306")
    deployment = Deployment(
        tmp_path_factory.mktemp("lifecycle"),
        database="mysql",
        rules=TEST_RULES,
        extra_env={"NETA_TEST_FAULT_AT": "finish_deadlock", "NETA_INLINE_WORKERS": "8"},
    )
    with deployment as running:
        yield running


def wait_run(server: Deployment, run_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, run = server.http(0, "get", f"/api/runs/{run_id}/")
        assert status == 200, run
        if run["status"] in TERMINAL:
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} still {run['status']} after {timeout} s")


def run_counts(server: Deployment) -> dict[str, int]:
    return dict(server.sql("SELECT status, COUNT(*) FROM runtime_agentrun GROUP BY status"))


@pytest.mark.slow
def test_twenty_sessions_five_turns_no_failed_or_stuck_run_and_a_deadlock_retried(server):
    sessions = []
    for i in range(SESSIONS):
        status, session = server.http(0, "post", "/api/sessions/", {"title": f"load {i}"})
        assert status == 201, session
        sessions.append(session["sessionId"])
    problems: list[str] = []
    finished: list[dict] = []
    start = threading.Barrier(SESSIONS)

    def drive(sid: str) -> None:
        try:
            start.wait(30)
            for turn in range(TURNS):
                status, body = server.http(0, "post", f"/api/sessions/{sid}/prompt/", {"text": f"turn {turn}"})
                if status != 202 or body["queuedAs"] is not None:
                    problems.append(f"{sid} turn {turn}: {status} {body}")
                    return
                run = wait_run(server, body["run"]["runId"])
                finished.append(run)
                if run["status"] != "completed":
                    problems.append(f"{sid} turn {turn}: {run['status']} {run.get('error')}")
        except Exception as exc:  # noqa: BLE001 - reported by the test
            problems.append(f"{sid}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=drive, args=(sid,)) for sid in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    log = "\n".join(line for line in server.log("daphne0").splitlines() if '"GET ' not in line and '"POST ' not in line)
    assert problems == [], log[-3000:]
    assert len(finished) == SESSIONS * TURNS
    assert run_counts(server) == {"completed": SESSIONS * TURNS}  # 0 failed, 0 queued or running left
    assert "provoking a deadlock" in log
    retries = [line for line in log.splitlines() if "retrying the transaction" in line]
    # The provoked one: the finish (a completion goes through ``next_input(or_complete=True)``).
    assert any(("the next input of run" in line or "finishing run" in line) and "1213" in line for line in retries), log[-3000:]
    print(f"{len(finished)} turns, {len(retries)} transaction(s) retried: {retries}")
