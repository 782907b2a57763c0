"""The task envelope: strict parsing with errors that name the path, and a lossless round trip."""

from __future__ import annotations

import json

import pytest

from runtime.subagents.envelope import ENVELOPE_VERSION, EnvelopeError, parse_envelope
from tests.subagents.helpers import envelope_dict


def test_round_trip_keeps_every_field(tmp_path):
    data = envelope_dict(tmp_path, deadline=1_900_000_000_000, allowedSkills=["pdf"], contextSummary="the parent said hi")
    envelope = parse_envelope(json.dumps(data))
    assert envelope.run_id == data["runId"]
    assert envelope.runtime_config.model.provider_kind == "scripted"
    assert envelope.tool_policy.grant("ls").route == "worker-local"
    assert envelope.limits.max_tool_calls == 10
    again = parse_envelope(envelope.to_json())
    assert again == envelope
    assert json.loads(envelope.to_json())["allowedSkills"] == ["pdf"]


def test_defaults_fill_optional_fields(tmp_path):
    data = envelope_dict(tmp_path)
    del data["limits"]["maxToolCalls"], data["contextSummary"], data["allowedSkills"]
    envelope = parse_envelope(data)
    assert envelope.limits.max_tool_calls == 50
    assert envelope.context_summary == ""
    assert envelope.deadline is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("task"), "envelope.task: is required"),
        (lambda d: d.update(surprise=1), "envelope: unknown key(s) 'surprise'"),
        (lambda d: d["limits"].update(maxTurns=0), "envelope.limits.maxTurns: must be an integer >= 1, got 0"),
        (lambda d: d["limits"].update(maxTurns=True), "envelope.limits.maxTurns: must be an integer >= 1, got True"),
        (lambda d: d["limits"].update(heartbeatSeconds=40), "envelope.limits.heartbeatSeconds: must be below idleSeconds"),
        (lambda d: d["toolPolicy"]["tools"].append({"name": "ls", "route": "worker-local"}), "names a tool twice: ls"),
        (lambda d: d["toolPolicy"]["tools"][0].update(route="disabled"), "envelope.toolPolicy.tools[0].route: must be one of"),
        (lambda d: d["runtimeConfig"].update(cwd="relative/dir"), "envelope.runtimeConfig.cwd: must be an absolute path"),
        (lambda d: d["runtimeConfig"]["sandbox"].update(mode="auto"), "envelope.runtimeConfig.sandbox.mode: must be one of none, bwrap"),
        (lambda d: d["runtimeConfig"]["sandbox"]["toolSettings"].update(NETA_SECRET_KEY="x"), "unknown setting(s) NETA_SECRET_KEY"),
        (lambda d: d["runtimeConfig"]["model"].update(apiKeyEnv="1BAD"), "apiKeyEnv: is not an environment variable name"),
        (lambda d: d.update(v=ENVELOPE_VERSION + 1), f"envelope.v: version {ENVELOPE_VERSION + 1} is not known"),
        (lambda d: d.update(taskIndex="0"), "envelope.taskIndex: must be an integer >= 0, got '0'"),
    ],
)
def test_bad_envelopes_say_where(tmp_path, change, message):
    data = envelope_dict(tmp_path)
    change(data)
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(json.dumps(data))
    assert message in str(info.value)


def test_not_json_and_not_an_object():
    with pytest.raises(EnvelopeError, match="envelope: not JSON"):
        parse_envelope("{nope")
    with pytest.raises(EnvelopeError, match="envelope: must be an object, got list"):
        parse_envelope("[]")
