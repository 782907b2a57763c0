"""The real child process under its supervisor, driven by the offline scripted model.

Every test starts ``python -m runtime.subagents.child`` for real and checks what a host
relies on: the event order, one terminal event whatever happens, a scrubbed environment,
its own process group, cancel and kill escalation, budgets, stalls, garbage on stdout,
the proxy round trip, and no process left behind.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.subagents.envelope import parse_envelope
from runtime.subagents.supervisor import (
    ChildSupervisor,
    SupervisorError,
    Timings,
    child_argv,
    child_environment,
)
from tests.subagents.helpers import (
    Recorder,
    envelope_dict,
    group_members,
    make_envelope,
    processes_with,
    scripted_rules,
)

FAST = Timings(term_after=0.5, kill_after=1.5, exit_grace=2.0, wall_clock_grace=0.5)


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "workspace"
    path.mkdir()
    (path / "notes.txt").write_text("hello\n")
    return path


def supervise(envelope, recorder=None, **kw) -> tuple[ChildSupervisor, Recorder]:
    recorder = recorder or Recorder()
    sup = ChildSupervisor(envelope, on_event=recorder, on_noise=recorder.on_noise, timings=kw.pop("timings", FAST), **kw)
    return sup, recorder


def assert_one_terminal(recorder: Recorder, outcome) -> None:
    terminals = [e for e in recorder.events if e["type"] in ("run_end", "run_error")]
    assert len(terminals) == 1, recorder.types()
    assert terminals[0] is outcome.terminal or terminals[0] == outcome.terminal
    assert recorder.events[-1] == outcome.terminal
    seqs = [e["seq"] for e in recorder.events]
    assert seqs == list(range(1, len(seqs) + 1))  # no gap, synthetic terminals included


def assert_no_leftovers(outcome) -> None:
    assert group_members(outcome.pid) == []


# --------------------------------------------------------------------------- the happy path


def test_a_task_that_lists_the_workspace_runs_start_to_end(workspace):
    sup, rec = supervise(make_envelope(workspace))
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    types = rec.types()
    assert types[0] == "run_start" and types[-1] == "run_end"
    order = [t for t in types if t in ("tool_call", "tool_result", "assistant_message")]
    assert order == ["assistant_message", "tool_call", "tool_result", "assistant_message"]
    call = rec.wait_for("tool_call")
    result = rec.wait_for("tool_result")
    assert (call["name"], call["route"], call["arguments"]) == ("ls", "worker-local", {"path": "."})
    assert result["isError"] is False and "notes.txt" in result["preview"]
    end = outcome.terminal
    assert end["status"] == "completed" and end["finalText"] == "The workspace holds notes.txt."
    assert end["counts"]["turns"] == 2 and end["counts"]["toolCalls"] == 1
    assert end["usage"]["totalTokens"] > 0
    assert "".join(e["delta"] for e in rec.events if e["type"] == "assistant_delta" and e["turn"] == 2) == end["finalText"]
    assert outcome.exit_code == 0 and outcome.signal is None and not outcome.synthetic
    assert outcome.noise["count"] == 0
    assert_no_leftovers(outcome)


def test_context_summary_reaches_the_model_as_part_of_the_system_prompt(workspace):
    rules = scripted_rules([{"text": "plain"}], rules=[{"match": {"system": "parent_context>\\nPARENT-FACT"}, "reply": [{"text": "saw the fact"}]}])
    outcome = supervise(make_envelope(workspace, rules=rules, contextSummary="PARENT-FACT: the build is red"))[0].run()
    assert outcome.terminal["finalText"] == "saw the fact"


def test_a_final_answer_over_the_line_limit_arrives_whole_with_its_usage(workspace):
    """~2 MiB of Chinese as the answer: a completed run (not ``child_crash``), the text whole,
    the usage reported, no noise."""
    text = "这是一个很长的回答。" * 70_000  # 700 000 characters, 2.1 MB of UTF-8
    rules = scripted_rules({"steps": [{"text": text}], "chunk_size": 0, "usage": {"input": 1000, "output": 377_000}})
    sup, rec = supervise(make_envelope(workspace, rules=rules))
    outcome = sup.run()
    end = outcome.terminal
    assert (end["type"], end.get("status"), outcome.synthetic) == ("run_end", "completed", False), end.get("message")
    assert end["finalText"] == text and "textParts" not in end
    assert end["usage"]["output"] == 377_000
    assert outcome.noise["count"] == 0 and outcome.exit_code == 0
    assert rec.events[-1]["finalText"] == text  # what the host records is the whole text too


# --------------------------------------------------------------------------- isolation


def test_environment_is_scrubbed_and_the_child_has_its_own_process_group(workspace):
    canary = "canary-" + os.urandom(6).hex()
    environ = dict(
        os.environ,
        NETA_SECRET_KEY=canary,
        DATABASE_URL=f"mysql://root:{canary}@db/neta",
        OTHER_PROVIDER_API_KEY=canary,
        NETA_TEST_MYSQL_URL=canary,
        SUBAGENT_MODEL_KEY="the-model-key",
    )
    data = envelope_dict(workspace, rules=scripted_rules([{"text": "waiting"}, {"pause_ms": 20000}, {"text": "done"}]))
    data["runtimeConfig"]["model"]["apiKeyEnv"] = "SUBAGENT_MODEL_KEY"
    seen = {}
    rec = Recorder()

    def look(event):
        pid = event["pid"]
        seen["environ"] = Path(f"/proc/{pid}/environ").read_bytes()
        seen["pgid"], seen["sid"] = os.getpgid(pid), os.getsid(pid)
        seen["cwd"] = os.readlink(f"/proc/{pid}/cwd")
        sup.cancel(by="test")

    rec.hooks["run_start"] = look
    sup, _ = supervise(parse_envelope(data), rec, environ=environ)
    outcome = sup.run()
    environ_text = seen["environ"].decode()
    assert canary not in environ_text
    names = {item.split("=", 1)[0] for item in environ_text.split("\0") if item}
    assert "SUBAGENT_MODEL_KEY=the-model-key" in environ_text.split("\0")
    assert not {"NETA_SECRET_KEY", "DATABASE_URL", "OTHER_PROVIDER_API_KEY", "DJANGO_SETTINGS_MODULE"} & names
    assert names <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "PYTHONPATH", "PYTHONSAFEPATH", "SUBAGENT_MODEL_KEY"}
    assert outcome.pid != os.getpid()
    assert seen["pgid"] == outcome.pid != os.getpgid(0)
    assert seen["sid"] == outcome.pid != os.getsid(0)
    assert seen["cwd"] == str(workspace.resolve())
    assert outcome.terminal["code"] == "cancelled"


def test_a_key_variable_naming_a_server_setting_is_refused(workspace):
    data = envelope_dict(workspace)
    data["runtimeConfig"]["model"]["apiKeyEnv"] = "NETA_SECRET_KEY"
    with pytest.raises(SupervisorError, match="no configuration may read it"):
        child_environment(parse_envelope(data), {"NETA_SECRET_KEY": "x"})


def test_the_child_dies_with_its_supervisor(workspace, tmp_path):
    """A supervising process killed with SIGKILL takes its child with it (PR_SET_PDEATHSIG)."""
    data = envelope_dict(workspace, rules=scripted_rules([{"text": "long"}, {"pause_ms": 60000}]))
    script = tmp_path / "host.py"
    script.write_text(
        "import json, sys, time\n"
        "from runtime.subagents.envelope import parse_envelope\n"
        "from runtime.subagents.supervisor import ChildSupervisor\n"
        "def started(event):\n"
        "    if event['type'] == 'run_start':\n"
        "        print(event['pid'], flush=True)\n"
        f"sup = ChildSupervisor(parse_envelope(json.loads({json.dumps(json.dumps(data))})), on_event=started)\n"
        "sup.start()\n"
        "time.sleep(120)\n"
    )
    child_pid = None
    host = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        child_pid = int(host.stdout.readline())
        assert group_members(child_pid) == [child_pid]
        # Stopped, the child cannot notice its stdin closing: only PR_SET_PDEATHSIG ends it.
        os.kill(child_pid, signal.SIGSTOP)
        host.kill()
        host.wait()
        for _ in range(200):
            if not group_members(child_pid, alive=True):
                break
            time.sleep(0.05)
        assert group_members(child_pid, alive=True) == []
    finally:
        host.kill()
        host.wait()
        if child_pid and group_members(child_pid, alive=True):
            os.killpg(child_pid, signal.SIGKILL)  # the test failed: leave nothing behind


# --------------------------------------------------------------------------- crash, cancel, stall


def test_kill_9_mid_run_gives_a_child_crash_terminal(workspace):
    rules = scripted_rules([{"text": "Working on it."}, {"pause_ms": 30000}, {"text": "never"}])
    rec = Recorder()
    rec.hooks["assistant_delta"] = lambda event: os.kill(sup.pid, signal.SIGKILL)
    sup, _ = supervise(make_envelope(workspace, rules=rules), rec)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    terminal = outcome.terminal
    assert terminal["type"] == "run_error" and terminal["code"] == "child_crash" and terminal["synthetic"] is True
    assert terminal["signal"] == "SIGKILL" and outcome.signal == signal.SIGKILL
    assert "SIGKILL" in terminal["message"]
    assert terminal["partialText"].startswith("Work")  # what streamed before the kill is kept
    assert_no_leftovers(outcome)


def test_kill_9_at_random_points_always_ends_in_one_terminal(workspace):
    import random

    rng = random.Random(1414)
    for _ in range(5):
        kill_at = rng.randint(1, 8)
        rec = Recorder()
        sup = None

        def maybe_kill(event, kill_at=kill_at, rec=rec):
            if len(rec.events) == kill_at and event["type"] not in ("run_end", "run_error"):
                os.kill(sup.pid, signal.SIGKILL)

        recorder_then_kill = lambda event, rec=rec, hook=maybe_kill: (rec(event), hook(event))  # noqa: E731
        sup = ChildSupervisor(make_envelope(workspace), on_event=recorder_then_kill, timings=FAST)
        outcome = sup.run()
        assert_one_terminal(rec, outcome)
        assert outcome.terminal["type"] in ("run_end", "run_error")
        if outcome.terminal["type"] == "run_error":
            assert outcome.terminal["code"] == "child_crash" and outcome.terminal["signal"] == "SIGKILL"
        assert_no_leftovers(outcome)


def test_cancel_during_a_bash_command_ends_cancelled_with_partial_output_and_no_orphans(workspace):
    marker = f"{30 + os.getpid() % 50}.{int.from_bytes(os.urandom(2), 'big') % 1000:03d}"  # a unique sleep to find it
    rules = scripted_rules(
        [{"text": "Running a long command."}, {"tool_call": {"name": "bash", "arguments": {"command": f"sleep {marker}"}}}],
        [{"text": "never reached"}],
    )
    rec = Recorder()
    rec.hooks["tool_call"] = lambda event: sup.cancel(by="test-user")
    # The child's own answer is what is tested, so the host waits long before it would signal:
    # FAST's 0.5 s is shorter than a loaded machine takes to schedule the child's cancel path.
    patient = Timings(term_after=20.0, kill_after=30.0, exit_grace=10.0, wall_clock_grace=0.5)
    sup, _ = supervise(make_envelope(workspace, rules=rules), rec, timings=patient)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    terminal = outcome.terminal
    assert (terminal["type"], terminal["code"]) == ("run_error", "cancelled")
    assert not outcome.synthetic  # the child itself answered the cancel
    assert terminal["partialText"] == "Running a long command."
    assert outcome.cancelled_by == "test-user"
    assert outcome.killed == []  # no signal was needed
    result = rec.wait_for("tool_result")
    assert result["isError"] is True
    assert_no_leftovers(outcome)
    assert processes_with(f"sleep {marker}") == []


def test_cancel_of_a_child_that_does_not_answer_escalates_to_sigkill(workspace):
    rules = scripted_rules([{"text": "x"}, {"pause_ms": 30000}])
    rec = Recorder()

    def freeze(event):
        os.kill(sup.pid, signal.SIGSTOP)  # the child can read nothing and answer nothing
        sup.cancel(by="test")

    rec.hooks["run_start"] = freeze
    sup, _ = supervise(make_envelope(workspace, rules=rules), rec)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    assert outcome.killed == ["SIGTERM", "SIGKILL"]
    terminal = outcome.terminal
    assert (terminal["code"], terminal["synthetic"], terminal["signal"]) == ("cancelled", True, "SIGKILL")
    assert_no_leftovers(outcome)


def test_a_silent_child_is_killed_as_stalled(workspace):
    rules = scripted_rules([{"text": "x"}, {"pause_ms": 30000}])
    rec = Recorder()
    rec.hooks["run_start"] = lambda event: os.kill(sup.pid, signal.SIGSTOP)  # no heartbeats any more
    sup, _ = supervise(make_envelope(workspace, rules=rules, limits={"idleSeconds": 1.0, "heartbeatSeconds": 0.2}), rec)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    terminal = outcome.terminal
    assert (terminal["code"], terminal["synthetic"]) == ("stalled", True)
    assert rec.types()[0] == "run_start"  # it was stalled after it started, not during start-up
    assert outcome.killed == ["SIGKILL"]
    assert_no_leftovers(outcome)


def test_heartbeats_keep_a_slow_but_alive_child_from_stalling(workspace):
    rules = scripted_rules([{"text": "thinking slowly"}, {"pause_ms": 3000}, {"text": " and done"}])
    outcome = supervise(make_envelope(workspace, rules=rules, limits={"idleSeconds": 2.0, "heartbeatSeconds": 0.2}))[0].run()
    assert outcome.terminal["status"] == "completed"
    assert outcome.terminal["finalText"] == "thinking slowly and done"


# --------------------------------------------------------------------------- budgets


LOOPING = scripted_rules([{"text": "Again."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}])


@pytest.mark.parametrize(
    ("limits", "reason", "turns", "tool_calls"),
    [
        ({"maxTurns": 1}, "budget_turns", 1, 0),
        ({"maxTurns": 3}, "budget_turns", 3, 2),
        ({"maxToolCalls": 2}, "budget_tool_calls", 3, 2),
        ({"maxToolCalls": 0}, "budget_tool_calls", 1, 0),
        ({"maxTokens": 1}, "budget_tokens", 1, 0),
    ],
)
def test_budgets_stop_the_child_as_partial(workspace, limits, reason, turns, tool_calls):
    sup, rec = supervise(make_envelope(workspace, rules=LOOPING, limits=limits))
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    end = outcome.terminal
    assert (end["type"], end["status"], end["stopReason"]) == ("run_end", "partial", reason)
    assert (end["counts"]["turns"], end["counts"]["toolCalls"]) == (turns, tool_calls)
    assert end["finalText"] == "\n\n".join(["Again."] * turns)


def test_cost_budget(workspace):
    data = envelope_dict(workspace, rules=LOOPING, limits={"maxCost": 0.000001})
    data["runtimeConfig"]["model"]["prices"] = {"input": 10, "output": 10}
    outcome = supervise(parse_envelope(data))[0].run()
    assert (outcome.terminal["status"], outcome.terminal["stopReason"]) == ("partial", "budget_cost")


def test_wall_clock_budget_is_enforced_by_the_child(workspace):
    rules = scripted_rules([{"text": "Started."}, {"pause_ms": 30000}])
    patient = Timings(term_after=0.5, kill_after=1.5, wall_clock_grace=10.0)  # the host stays out of it
    sup, rec = supervise(make_envelope(workspace, rules=rules, limits={"wallClockSeconds": 0.5, "heartbeatSeconds": 0.2}), timings=patient)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    end = outcome.terminal
    assert (end["type"], end["status"], end["stopReason"], end["finalText"]) == ("run_end", "partial", "budget_wall_clock", "Started.")
    assert outcome.cancelled_by is None  # the host did not need to step in
    assert_no_leftovers(outcome)


def test_wall_clock_is_enforced_by_the_host_when_the_child_cannot(workspace):
    rules = scripted_rules([{"text": "Started."}, {"pause_ms": 30000}])
    rec = Recorder()
    rec.hooks["run_start"] = lambda event: os.kill(sup.pid, signal.SIGSTOP)
    sup, _ = supervise(make_envelope(workspace, rules=rules, limits={"wallClockSeconds": 1.0, "idleSeconds": 30, "heartbeatSeconds": 0.2}), rec)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    assert (outcome.terminal["code"], outcome.terminal["synthetic"]) == ("budget_wall_clock", True)
    assert outcome.cancelled_by == "host:wall_clock" and outcome.killed == ["SIGTERM", "SIGKILL"]


# --------------------------------------------------------------------------- protocol and proxy


def test_garbage_on_stdout_is_kept_and_reported_and_the_run_still_ends(workspace, tmp_path):
    wrapper = tmp_path / "noisy-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        "echo 'this is not JSON'\n"
        "echo '[1, 2, 3]'\n"
        "echo '{\"v\": 1, \"runId\": \"someone-else\", \"seq\": 1, \"ts\": 1, \"type\": \"run_start\"}'\n"
        "head -c 2000000 /dev/zero | tr '\\0' 'x'; echo\n"
        "echo 'a warning on stderr' >&2\n"
        f"exec {sys.executable} \"$@\"\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    sup, rec = supervise(make_envelope(workspace), python=str(wrapper))
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    assert outcome.terminal["status"] == "completed"
    assert outcome.noise["count"] == 4
    reasons = [item["reason"] for item in outcome.noise["kept"]]
    assert reasons[0].startswith("not JSON") and reasons[1] == "an event is a JSON object, got list"
    assert "expected" in reasons[2] and "longer than" in reasons[3]
    assert [n["reason"] for n in rec.noise] == reasons
    assert "a warning on stderr" in outcome.stderr_tail


def test_a_bad_envelope_is_answered_with_bad_envelope_and_exit_2(workspace):
    data = envelope_dict(workspace)
    data["limits"]["maxTurns"] = -1
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(child_argv(), input=json.dumps(data).encode() + b"\n", capture_output=True, env=env, cwd=workspace, timeout=30)
    assert done.returncode == 2
    event = json.loads(done.stdout)
    assert (event["type"], event["code"], event["runId"]) == ("run_error", "bad_envelope", data["runId"])
    assert "envelope.limits.maxTurns" in event["message"]


def test_a_worker_local_grant_the_child_cannot_run_is_a_bad_envelope(workspace):
    envelope = make_envelope(workspace, tools=[{"name": "read_skill", "route": "worker-local"}])
    outcome = supervise(envelope)[0].run()
    assert (outcome.terminal["code"], outcome.exit_code) == ("bad_envelope", 2)
    assert "read_skill" in outcome.terminal["message"]


def test_proxy_tools_go_to_the_host_and_the_answer_comes_back(workspace):
    rules = scripted_rules(
        [{"text": "Reading the skill."}, {"tool_call": {"name": "read_skill", "arguments": {"name": "pdf"}}}],
        [{"text": "Read it."}],
    )
    tools = [
        {"name": "read_skill", "route": "main-process-proxy", "description": "Load a skill.", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}},
    ]
    asked = []

    def handler(event):
        asked.append(event)
        return {"content": [{"type": "text", "text": f"# Skill {event['arguments']['name']}\nUse pdftotext."}], "isError": False}

    sup, rec = supervise(make_envelope(workspace, rules=rules, tools=tools), on_proxy_request=handler)
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    assert [(e["name"], e["arguments"]) for e in asked] == [("read_skill", {"name": "pdf"})]
    result = rec.wait_for("tool_result")
    assert result["preview"] == "# Skill pdf\nUse pdftotext." and result["isError"] is False
    assert outcome.terminal["status"] == "completed" and outcome.terminal["counts"]["proxyCalls"] == 1


def test_a_failing_proxy_handler_becomes_a_tool_error_not_a_dead_run(workspace):
    rules = scripted_rules(
        [{"tool_call": {"name": "read_skill", "arguments": {"name": "pdf"}}}],
        [{"text": "Could not read it."}],
    )
    tools = [{"name": "read_skill", "route": "main-process-proxy"}]

    def handler(event):
        raise RuntimeError("registry offline")

    sup, rec = supervise(make_envelope(workspace, rules=rules, tools=tools), on_proxy_request=handler)
    outcome = sup.run()
    result = rec.wait_for("tool_result")
    assert result["isError"] is True and "registry offline" in result["preview"]
    assert outcome.terminal["status"] == "completed"


def test_a_tool_the_envelope_does_not_grant_is_refused_inside_the_child(workspace):
    rules = scripted_rules([{"tool_call": {"name": "write", "arguments": {"path": "x.txt", "content": "no"}}}], [{"text": "ok"}])
    sup, rec = supervise(make_envelope(workspace, rules=rules))
    outcome = sup.run()
    result = rec.wait_for("tool_result")
    assert result["isError"] is True and "not available to this subagent" in result["preview"]
    assert not (workspace / "x.txt").exists()
    assert outcome.terminal["status"] == "completed"


def test_the_child_loads_no_database_layer_and_no_project_settings(workspace):
    """The child's whole run (tools included) with only ``django.conf`` configured by value."""
    probe = (
        "import io, json, os, sys\n"
        "from runtime.subagents.envelope import parse_envelope\n"
        "from runtime.subagents.child import Child, configure_tool_settings\n"
        "from runtime.subagents.protocol import EventWriter\n"
        "envelope = parse_envelope(sys.argv[1])\n"
        "configure_tool_settings(envelope)\n"
        "read_end, _keep_open = os.pipe()\n"
        "end = Child(envelope, EventWriter(io.BytesIO(), envelope.run_id), os.fdopen(read_end, 'rb')).run()\n"
        "from django.conf import settings\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('django.db', 'django.apps', 'neta', 'skills_registry', 'sessions_tree.providers', 'toolcatalog.models')))\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "from toolcatalog.sandbox import ProcessLimits\n"
        "try:\n    secret = settings.SECRET_KEY\nexcept ImproperlyConfigured:\n    secret = None\n"
        "print(json.dumps({'status': end.get('status'), 'loaded': loaded, 'sandbox': settings.NETA_SANDBOX,\n"
        "                  'secret': secret, 'bashTimeout': ProcessLimits.from_settings().max_timeout}))\n"
        "sys.stdout.flush(); os._exit(0)\n"
    )
    data = envelope_dict(workspace)
    data["runtimeConfig"]["sandbox"]["toolSettings"] = {"NETA_BASH_MAX_TIMEOUT": 77}
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-P", "-c", probe, json.dumps(data)], capture_output=True, env=env, cwd=workspace, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report == {"status": "completed", "loaded": [], "sandbox": "none", "secret": None, "bashTimeout": 77.0}


def test_the_child_starts_without_the_heavy_modules_and_still_validates_tool_arguments(workspace):
    """Up to ``run_start`` (envelope, tools, model spec) the child loads no jsonschema, Django,
    HTTP client, regex or gitignore engine; they come with the first call that needs them, and
    a tool's arguments are still checked against its schema there."""
    heavy = ("jsonschema", "django", "httpx2", "ssl", "regex", "pathspec", "asyncio")
    probe = (
        "import io, json, os, sys\n"
        "from runtime.subagents.envelope import parse_envelope\n"
        "from runtime.subagents.child import Child\n"
        "from runtime.subagents.protocol import EventWriter\n"
        "envelope = parse_envelope(sys.argv[1])\n"
        "read_end, _keep_open = os.pipe()\n"
        "from toolcatalog import protocol; protocol.defer_schema_checks()  # as the child's main() does\n"
        "child = Child(envelope, EventWriter(io.BytesIO(), envelope.run_id), os.fdopen(read_end, 'rb'))\n"
        f"heavy = {heavy!r}\n"
        "at_start = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "bad = child._run_local(child.tools['ls'][1], {'path': 7})\n"
        "good = child._run_local(child.tools['ls'][1], {'path': '.'})\n"
        "print(json.dumps({'atStart': at_start, 'bad': [bad.is_error, bad.text_output()[:80]], 'good': good.text_output(),\n"
        "                  'later': sorted({m.split('.')[0] for m in sys.modules} & set(heavy))}))\n"
        "sys.stdout.flush(); os._exit(0)\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-P", "-c", probe, json.dumps(envelope_dict(workspace))], capture_output=True, env=env, cwd=workspace, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["atStart"] == []
    assert report["bad"][0] is True and report["bad"][1].startswith("Invalid arguments for tool 'ls'")
    assert "notes.txt" in report["good"]
    assert {"jsonschema", "django"} <= set(report["later"])  # loaded for the first tool call, not before


def test_a_child_that_never_starts_talking_is_stalled_after_the_startup_allowance(workspace):
    rec = Recorder()
    sup = ChildSupervisor(
        make_envelope(workspace, limits={"idleSeconds": 0.5, "heartbeatSeconds": 0.1}),
        on_event=rec,
        timings=Timings(startup=1.0, term_after=0.5, kill_after=1.5),
    )
    sup.start()
    os.kill(sup.pid, signal.SIGSTOP)
    outcome = sup.wait()
    assert rec.types() == ["run_error"]
    assert (outcome.terminal["code"], outcome.terminal["synthetic"]) == ("stalled", True)
    assert "1 s" in outcome.terminal["message"]
    assert_no_leftovers(outcome)


def test_a_child_cancelled_before_it_starts_never_starts(workspace):
    rec = Recorder()
    sup = ChildSupervisor(make_envelope(workspace), on_event=rec, timings=FAST)
    sup.cancel(by="parent-abort")
    sup.start()
    outcome = sup.wait(5)
    assert outcome.pid is None and rec.types() == ["run_error"]
    assert (outcome.terminal["code"], outcome.terminal["synthetic"], outcome.cancelled_by) == ("cancelled", True, "parent-abort")


def test_a_child_that_cannot_be_spawned_gets_a_spawn_failed_terminal(workspace, tmp_path):
    sup, rec = supervise(make_envelope(workspace), python=str(tmp_path / "no-such-python"))
    outcome = sup.run()
    assert_one_terminal(rec, outcome)
    assert (outcome.terminal["code"], outcome.pid) == ("spawn_failed", None)
    assert "no-such-python" in outcome.terminal["message"]
