"""The OpenAI-compatible endpoints under a real Daphne (``python -m neta.serve``, embedded: SQLite,
the in-process channel layer, the inline backend, the offline scripted model), driven by the
official ``openai`` SDK. One deployment per test module; the REST API and the session socket
check what the tree holds."""

from __future__ import annotations

import json
import sys

import pytest

from tests.openai_api.openai_support import RULES, SETUP, Deployment
from tests.support.deployment import Deployment as Cluster
from tests.support.deployment import cleanup_workdir


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("openai")
    # Two request threads: the answers that follow runs must not hold them (test_ordinary_runs.py).
    env = {"NETA_RUN_STALE_SECONDS": "30", "NETA_HTTP_THREADS": "2"}
    go = workdir / "go"
    rules = json.loads(json.dumps(RULES).replace("@GO@", str(go)))
    with Cluster(workdir, servers=1, workers=0, database="sqlite", redis=False, backend="inline", rules=rules, extra_env=env) as cluster:
        out = cluster.run([sys.executable, "-c", SETUP])
        deployment = Deployment(cluster, json.loads(out.strip().splitlines()[-1]))
        deployment.go = go
        yield deployment
    cleanup_workdir(workdir)
