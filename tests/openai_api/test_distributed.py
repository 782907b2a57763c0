"""The OpenAI endpoints on a distributed deployment: MariaDB, the Redis channel layer, turns on a
Celery worker. The answer follows a run another process executes, over Redis; the conversation
index is MariaDB's; a client that goes away aborts the worker's run."""

from __future__ import annotations

import json
import sys
import time

import openai
import pytest

from tests.support.services import require
from tests.support.deployment import Deployment as Cluster
from tests.support.deployment import cleanup_workdir
from tests.support.services import mariadb_available, redis_available
from tests.openai_api.openai_support import RULES, SETUP, Deployment, conversation

pytestmark = [pytest.mark.slow, pytest.mark.mariadb]

SESSION = "x-neta-session-id"


@pytest.fixture(scope="module")
def distributed(tmp_path_factory):
    require(mariadb_available(), "MariaDB is not reachable")
    require(redis_available(), "Redis is not reachable")
    workdir = tmp_path_factory.mktemp("openai-distributed")
    rules = json.loads(json.dumps(RULES).replace("@GO@", str(workdir / "go")))
    with Cluster(workdir, servers=1, workers=1, worker_concurrency=2, database="mysql", redis=True, backend="celery", rules=rules) as cluster:
        out = cluster.run([sys.executable, "-c", SETUP])
        yield Deployment(cluster, json.loads(out.strip().splitlines()[-1]))
    cleanup_workdir(workdir)


def test_streams_and_resends_across_processes(distributed):
    client = distributed.client()
    stream = client.responses.create(model="default", input="use a tool over redis", stream=True)
    sid = stream.response.headers[SESSION]
    events = list(stream)
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Let me look.Done looking."
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.output_text == "Let me look.Done looking."
    (run,) = distributed.runs(sid)
    assert run["backend"] == "celery" and run["status"] == "completed"
    # Chat Completions on the same deployment: a resend continues its session (MariaDB's index).
    raw = client.chat.completions.with_raw_response.create(model="default", messages=[{"role": "user", "content": "over redis"}])
    first, chat_sid = raw.parse().choices[0].message.content, raw.headers[SESSION]
    history = [{"role": "user", "content": "over redis"}, {"role": "assistant", "content": first}, {"role": "user", "content": "again"}]
    stream = client.chat.completions.create(model="default", messages=history, stream=True)
    chunks = list(stream)
    assert stream.response.headers[SESSION] == chat_sid
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: again"
    leaf = distributed.session(chat_sid)["leafEntryId"]
    assert conversation(distributed.entries(chat_sid), leaf) == [
        ("user", "over redis"), ("assistant", "Echo: over redis"), ("user", "again"), ("assistant", "Echo: again"),
    ]  # fmt: skip


def test_a_client_gone_aborts_the_workers_run(distributed):
    client = distributed.client()
    stream = client.responses.create(model="default", input="hold on over redis", stream=True)
    sid = stream.response.headers[SESSION]
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    deadline = time.monotonic() + 60
    while True:
        (run,) = distributed.runs(sid)
        if run["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, run
        time.sleep(0.2)
    assert run["status"] == "aborted" and run["error"] == "aborted by the user"
    with pytest.raises(openai.NotFoundError):
        distributed.client("bob").responses.retrieve(f"resp_{sid.replace('-', '')}00000000")
