"""``web_fetch`` routed ``worker-local`` runs inside the real subagent child process, with the
host's guard settings (allow/deny lists, limits) carried by the envelope: the child reads the
allowed page and is refused a blocked one, which never receives a request."""

from __future__ import annotations

import pytest

from runtime.subagents.envelope import parse_envelope, tool_settings_from_django
from runtime.subagents.supervisor import ChildSupervisor, Timings
from tests.subagents.helpers import Recorder, envelope_dict, scripted_rules
from tests.support.web_servers import SiteServer

FAST = Timings(term_after=0.5, kill_after=1.5, exit_grace=2.0, wall_clock_grace=0.5)


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def test_web_fetch_runs_in_the_child_under_the_host_s_guard(workspace, settings, tmp_path):
    with SiteServer() as allowed, SiteServer() as canary:
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{allowed.port}"]
        settings.NETA_WEB_FETCH_DENY = ["*.internal.example"]
        settings.NETA_TOOL_OUTPUT_DIR = tmp_path / "out"
        tool_settings = tool_settings_from_django()
        assert tool_settings["NETA_WEB_FETCH_ALLOW"] == [f"127.0.0.1:{allowed.port}"]
        rules = scripted_rules(
            [{"tool_call": {"name": "web_fetch", "arguments": {"url": allowed.url("/notes.txt")}}},
             {"tool_call": {"name": "web_fetch", "arguments": {"url": canary.url("/notes.txt")}}}],
            [{"text": "done"}],
        )
        raw = envelope_dict(workspace, rules=rules, tools=[{"name": "web_fetch", "route": "worker-local"}])
        raw["runtimeConfig"]["sandbox"]["toolSettings"] = tool_settings
        envelope = parse_envelope(raw)
        recorder = Recorder()
        outcome = ChildSupervisor(envelope, on_event=recorder, on_noise=recorder.on_noise, timings=FAST).run()
        assert outcome.terminal["status"] == "completed", outcome.terminal
        results = [e for e in recorder.events if e["type"] == "tool_result"]
        assert [r["isError"] for r in results] == [False, True]
        assert "line one of the plain text" in results[0]["preview"]
        assert "loopback" in results[1]["preview"] and "NETA_WEB_FETCH_ALLOW" in results[1]["preview"]
        assert [h.path for h in allowed.hits] == ["/notes.txt"]
        assert canary.hits == []
