"""A subagent child's model call broken after its output began is made again, as the parent's
turn does (runtime/runs/retries.py): the settings travel in the envelope, the broken reply stays
in the child's events and out of its context. A real child process streams from a local server
speaking Anthropic's wire protocol through the official SDK."""

from __future__ import annotations

import pytest

from runtime.models import Agent, ModelCall, RunStatus, SubprocessEvent, SubprocessRun
from tests.subagents.host_helpers import Parent, delegating, make_agent, policy
from tests.support.wire_servers import Reply, serve

pytestmark = pytest.mark.django_db(transaction=True)

anthropic_server, _clean = serve("anthropic", "anthropic_server")

PARTIAL = "The child's first attempt streams this much before the provider gives up."
ANSWER = "The child's answer, on the second try."
ONE = {"tasks": [{"agent": "wired", "task": "answer from the wire"}]}


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.NETA_LLM_RETRY_BASE_MS = 1  # 1, 2, 4 ms here (2, 4, 8 s in a deployment)
    settings.NETA_LLM_RETRIES = 3


def wired_agent(workspace, server, monkeypatch) -> Agent:
    from runtime.models import ModelConfig

    monkeypatch.setenv("CHILD_RETRY_TEST_KEY", "sk-test")  # the child reads its key from its environment
    model = ModelConfig.objects.create(
        name="wired-model", provider_kind="anthropic", provider_name="anthropic", model_id="wired-id",
        base_url=server.base_url, api_key_env="CHILD_RETRY_TEST_KEY", options={"timeout_seconds": 20},
    )  # fmt: skip
    return Agent.objects.create(name="wired", model=model, cwd=str(workspace))


def boss(workspace):
    return make_agent("boss", delegating("delegate_parallel", ONE, after="Boss done."), workspace=workspace, subagent_policy=policy("wired"))


def child_messages(child: SubprocessRun) -> list[dict]:
    return [e.payload for e in SubprocessEvent.objects.filter(run=child, type="assistant_message").order_by("seq")]


def test_a_childs_call_broken_mid_stream_is_made_again_and_the_child_completes(workspace, monkeypatch, anthropic_server):
    wired_agent(workspace, anthropic_server, monkeypatch)
    anthropic_server.script(
        Reply(content=[{"type": "text", "text": PARTIAL}], chunk=4, error_after=6),
        Reply(content=[{"type": "text", "text": ANSWER}]),
    )
    run = Parent(boss(workspace)).prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    child = SubprocessRun.objects.get(parent_run=run)
    assert child.status == "completed" and child.final_text == ANSWER, (child.status, child.error)
    broken, answered = child_messages(child)
    assert broken["stopReason"] == "error" and PARTIAL.startswith(broken["message"]["content"][0]["text"])
    assert answered["stopReason"] == "stop"
    # The retry was sent the task alone: the broken reply never entered the child's context.
    assert len(anthropic_server.requests) == 2
    assert [m["role"] for m in anthropic_server.requests[1].body["messages"]] == ["user"]
    # Both calls are in the run's trace, the first with its error.
    calls = list(ModelCall.objects.filter(subprocess_run=child).order_by("started_at", "pk"))
    assert [c.stop_reason for c in calls] == ["error", "stop"] and calls[0].error

