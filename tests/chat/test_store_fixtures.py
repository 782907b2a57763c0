"""The browser store and the kernel apply tree events the same way.

The fixtures are made by real provider operations; Python's ``apply_events`` and
the JS store (run with node) must both turn each ``before`` + ``events`` into
``after``. Fresh fixtures are generated on every provider in each run, so a
change on either side that breaks the agreement fails here, not in a browser.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from sessions_tree.events import TREE_EVENT_TYPES, apply_events
from tests.chat import store_fixtures
from tests.support.services import REPO, require

pytestmark = pytest.mark.django_db(databases="__all__")


def node_check(directory) -> dict:
    require(shutil.which("node") is not None, "node is not installed")
    out = subprocess.run(
        ["node", str(REPO / "tests" / "js" / "apply_fixtures.mjs"), str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_committed_fixtures_apply_in_python():
    fixtures = store_fixtures.load()
    assert len(fixtures) >= 25
    for fixture in fixtures:
        assert apply_events(fixture["before"], fixture["events"]) == fixture["after"], fixture["name"]


def agrees_with_fresh(fixture) -> None:
    """A windowed fixture's applied snapshot agrees with a fresh one where it must."""
    after, fresh = fixture["after"], fixture.get("fresh", fixture["after"])
    for key in ("revision", "leafId", "session", "labelsByEntryId", "inFlight", "runtimeContext"):
        assert after[key] == fresh[key], (fixture["name"], key)
    assert after["page"]["totalEntries"] == fresh["page"]["totalEntries"]
    # A leaf outside the window leaves the applied path short (the store then asks for a
    # fresh snapshot); whatever it shows is a tail of the real path.
    # Both show a tail of the same real path (the applied one may show more of it).
    shorter, longer = sorted((after["activePath"], fresh["activePath"]), key=len)
    assert not shorter or longer[-len(shorter):] == shorter, fixture["name"]


def test_committed_fixtures_cover_every_event_kind():
    events = [e for f in store_fixtures.load() for e in f["events"]]
    assert {e["type"] for e in events} == TREE_EVENT_TYPES
    assert any(e.get("inFlight") is True for e in events) and any(e.get("inFlight") is False for e in events)
    truncated = [f for f in store_fixtures.load() if f["before"]["page"]["truncated"]]
    assert truncated and any(f["after"]["page"]["activePathTruncated"] is False for f in truncated)


def test_committed_fixtures_apply_in_node():
    report = node_check(store_fixtures.COMMITTED)
    assert report["checked"] == len(store_fixtures.load())
    assert report["failures"] == []


def test_fresh_fixtures_agree_on_every_provider(provider, tmp_path):
    fixtures = store_fixtures.generate(provider)
    for fixture in fixtures:
        assert apply_events(fixture["before"], fixture["events"]) == fixture["after"], fixture["name"]
        agrees_with_fresh(fixture)
    store_fixtures.write(fixtures, tmp_path)
    report = node_check(tmp_path)
    assert report == {"checked": len(fixtures), "failures": []}
    if os.environ.get("NETA_WRITE_STORE_FIXTURES") == "1" and provider.kind == "file":
        shutil.rmtree(store_fixtures.COMMITTED, ignore_errors=True)
        store_fixtures.write(fixtures, store_fixtures.COMMITTED)


def test_a_broken_js_apply_is_noticed(tmp_path):
    """The node check can fail: a fixture whose `after` was tampered with is reported."""
    fixture = store_fixtures.load()[3]
    fixture["after"]["activePath"] = list(reversed(fixture["after"]["activePath"])) + ["nope"]
    store_fixtures.write([fixture], tmp_path)
    report = node_check(tmp_path)
    assert report["checked"] == 1 and len(report["failures"]) == 1
    assert "activePath" in report["failures"][0]["problem"]
