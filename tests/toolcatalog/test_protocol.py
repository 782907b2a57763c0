"""The tool protocol: validation before execute, errors as results, Pi's toolResult shape."""

from __future__ import annotations

import json
import threading

import pytest

from toolcatalog.manifest import ToolManifest
from toolcatalog.protocol import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    UnknownTool,
    all_tools,
    get_tool,
    register_tool,
    run_tool,
    unregister_tool,
)


class Echo(Tool):
    name = "test_echo"
    label = "Echo"
    description = "Echo a number"
    parameters = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "tag": {"type": "string"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    manifest = ToolManifest(kind="extension")
    calls = 0

    def execute(self, ctx, args):
        Echo.calls += 1
        if args.get("tag") == "boom":
            raise RuntimeError("exploded")
        if args.get("tag") == "refuse":
            raise ToolError("no, politely", details={"why": "test"})
        if args.get("tag") == "bad-return":
            return "not a result"
        if args.get("tag") == "bad-block":
            return ToolResult(content=[{"type": "video"}])
        if args.get("tag") == "surrogate":
            return ToolResult.text("x\udcff y", details={"k\ud800": "v\udc00"})
        return ToolResult.text(str(args["n"]), details={"n": args["n"]})


@pytest.fixture
def echo():
    tool = register_tool(Echo())
    Echo.calls = 0
    yield tool
    unregister_tool(tool.name)


@pytest.fixture
def plain_ctx(tmp_path):
    return ToolContext(roots=(tmp_path,), sandbox="none")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "'n' is a required property"),
        ({"n": "three"}, "n: 'three' is not of type 'integer'"),
        ({"n": -1}, "n: -1 is less than the minimum of 0"),
        ({"n": 1, "extra": True}, "Additional properties are not allowed ('extra' was unexpected)"),
        ([1, 2], "arguments must be a JSON object, got list"),
        (None, "arguments must be a JSON object, got NoneType"),
    ],
)
def test_bad_arguments_are_error_results_naming_the_problem(echo, plain_ctx, args, expected):
    result = run_tool(echo, plain_ctx, args)
    assert result.is_error
    assert expected in result.text_output()
    assert "test_echo" in result.text_output()
    assert Echo.calls == 0  # execute never ran


def test_exceptions_never_escape(echo, plain_ctx):
    result = run_tool(echo, plain_ctx, {"n": 1, "tag": "boom"})
    assert result.is_error
    assert result.text_output() == "Tool 'test_echo' failed: RuntimeError: exploded"

    refused = run_tool(echo, plain_ctx, {"n": 1, "tag": "refuse"})
    assert refused.is_error and refused.text_output() == "no, politely"
    assert refused.details == {"why": "test"}

    wrong = run_tool(echo, plain_ctx, {"n": 1, "tag": "bad-return"})
    assert wrong.is_error and "returned str, not ToolResult" in wrong.text_output()

    block = run_tool(echo, plain_ctx, {"n": 1, "tag": "bad-block"})
    assert block.is_error and "content[0].type must be 'text' or 'image'" in block.text_output()


def test_lone_surrogates_never_leave_a_tool(echo, plain_ctx):
    result = run_tool(echo, plain_ctx, {"n": 1, "tag": "surrogate"})
    encoded = json.dumps(result.to_pi_tool_result("c", "test_echo"), ensure_ascii=False).encode("utf-8")
    assert "\ufffd" in result.text_output()
    assert b"\xed" not in encoded  # no surrogate code unit got through


def test_cancelled_before_start(echo, tmp_path):
    cancel = threading.Event()
    cancel.set()
    ctx = ToolContext(roots=(tmp_path,), cancel=cancel, sandbox="none")
    result = run_tool(echo, ctx, {"n": 1})
    assert result.is_error and result.details == {"cancelled": True}
    assert Echo.calls == 0


def test_pi_tool_result_shape_and_key_order(echo, plain_ctx):
    ok = run_tool(echo, plain_ctx, {"n": 7}).to_pi_tool_result("call_1", "test_echo", timestamp=1700000000000)
    assert list(ok) == ["role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"]
    assert ok == {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "test_echo",
        "content": [{"type": "text", "text": "7"}],
        "details": {"n": 7},
        "isError": False,
        "timestamp": 1700000000000,
    }
    bare = ToolResult.text("x").to_pi_tool_result("c", "t")
    assert list(bare) == ["role", "toolCallId", "toolName", "content", "isError", "timestamp"]
    assert isinstance(bare["timestamp"], int)


def test_registry(echo):
    assert get_tool("test_echo") is echo
    names = [t.name for t in all_tools()]
    assert names[:7] == ["read", "bash", "edit", "write", "grep", "find", "ls"]
    with pytest.raises(ValueError, match="already registered"):
        register_tool(Echo())
    with pytest.raises(UnknownTool, match="unknown tool 'nope'"):
        get_tool("nope")

    class BadName(Echo):
        name = "Bad Name"

    with pytest.raises(ValueError, match="must be 1-64 chars"):
        register_tool(BadName())

    class BadSchema(Echo):
        name = "test_bad_schema"
        parameters = {"type": "objekt"}

    with pytest.raises(Exception, match="objekt"):
        register_tool(BadSchema())


def test_manifest_rejects_impossible_combinations():
    with pytest.raises(ValueError, match="default_route"):
        ToolManifest(default_route="elsewhere")
    with pytest.raises(ValueError, match="not supported in a worker"):
        ToolManifest(supported_in_worker=False, default_route="worker-local")
    with pytest.raises(ValueError, match="kind"):
        ToolManifest(kind="plugin")


def test_context_rejects_bad_roots_and_cwd(tmp_path):
    with pytest.raises(ValueError, match="at least one workspace root"):
        ToolContext(roots=())
    with pytest.raises(ValueError, match="not a directory"):
        ToolContext(roots=(tmp_path / "missing",))
    (tmp_path / "a").mkdir()
    with pytest.raises(ValueError, match="outside the workspace roots"):
        ToolContext(roots=(tmp_path / "a",), cwd=tmp_path)
    with pytest.raises(ValueError, match="sandbox"):
        ToolContext(roots=(tmp_path,), sandbox="docker")


def test_progress_callback_failure_does_not_break_the_tool(tmp_path):
    def broken(_partial):
        raise RuntimeError("ui went away")

    ctx = ToolContext(roots=(tmp_path,), sandbox="none", on_progress=broken)
    result = run_tool(get_tool("bash"), ctx, {"command": "for i in 1 2 3; do echo $i; sleep 0.3; done"})
    assert not result.is_error
    assert result.text_output().split() == ["1", "2", "3"]
