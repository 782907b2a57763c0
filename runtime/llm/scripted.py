"""The scripted provider: an offline model driven by a small rule file.

It makes the embedded demo and the tests work without a network, and it streams
exactly like a wire provider (same builder, same events), so what it writes into a
session is what a real model writing the same content would produce.

Rules (YAML or JSON file, or a dict) match the **last user message** and give a list
of replies; the n-th model call since that user message gets the n-th reply (the
last one repeats), so one rule can do "tool call → (tool result) → final answer".
The format is documented in docs/llm.md; `load_script` validates it and says where
it is wrong.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .assistant import AssistantBuilder
from .estimate import output_chars, prompt_chars, usage_tokens
from .cost import USAGE_KEYS
from .spec import LlmRequest, ModelSpec, StreamEvent

API = "scripted"
PACKAGE_DIR = Path(__file__).resolve().parent
DEMO_RULES = PACKAGE_DIR / "scripted_demo.yaml"
DEFAULT_CHUNK_SIZE = 8
USER_PLACEHOLDER = "{{user}}"
RESULT_PLACEHOLDER = "{{result}}"  # the text of the last tool result (e.g. the user's answer to ask_user)
NO_MATCH_MESSAGE = "scripted: no rule matches the last user message and there is no default"
#: The stream keeps its schedule by the clock and wakes at most this often, sending every
#: delta that is due (as a network read hands over the events that arrived meanwhile).
PACE_SECONDS = 0.05


class ScriptedRulesError(ValueError):
    """The rule file or dict is not valid; the message says where."""


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # text | thinking | tool_call | pause
    text: str = ""
    signature: str | None = None
    redacted: bool = False
    name: str = ""
    arguments: dict | None = None
    call_id: str | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    delay: float = 0.0  # seconds before each delta (pause: the pause)
    until_file: str = ""  # pause: ends early once this file exists


@dataclass(frozen=True, slots=True)
class Reply:
    steps: tuple[Step, ...]
    stop_reason: str | None = None
    error: str | None = None
    usage: dict | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    replies: tuple[Reply, ...]
    contains: str | None = None
    regex: re.Pattern | None = None
    system: re.Pattern | None = None

    def matches(self, user_text: str, system_prompt: str) -> bool:
        if self.contains is not None and self.contains not in user_text.lower():
            return False
        if self.regex is not None and not self.regex.search(user_text):
            return False
        if self.system is not None and not self.system.search(system_prompt):
            return False
        return True


@dataclass(frozen=True, slots=True)
class Script:
    rules: tuple[Rule, ...]
    default: Rule | None

    def pick(self, user_text: str, system_prompt: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(user_text, system_prompt):
                return rule
        return self.default


# -- loading and validation -----------------------------------------------------------------

_STEP_KEYS = {
    "text": {"text", "delay_ms", "chunk_size"},
    "thinking": {"thinking", "signature", "redacted", "delay_ms", "chunk_size"},
    "tool_call": {"tool_call", "delay_ms", "chunk_size"},
    "pause_ms": {"pause_ms", "until_file"},
}
_REPLY_KEYS = {"steps", "stop_reason", "error", "usage", "delay_ms", "chunk_size"}
_RULE_KEYS = {"match", "replies", "reply"}
_TOP_KEYS = {"version", "rules", "default", "delay_ms", "chunk_size"}
_STOP_REASONS = {"stop", "length", "toolUse"}
_USAGE_KEYS = set(USAGE_KEYS)  # the usage object's keys, from the one list


def _fail(where: str, problem: str):
    raise ScriptedRulesError(f"{where}: {problem}")


def _unknown(where: str, data: dict, allowed: set) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        _fail(where, f"unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(sorted(allowed))}")


def _timing(where: str, data: dict, inherited: tuple[int, float]) -> tuple[int, float]:
    chunk, delay = inherited
    if "chunk_size" in data:
        value = data["chunk_size"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            _fail(where, f"chunk_size must be an integer >= 0 (0 = whole text in one delta), got {value!r}")
        chunk = value
    if "delay_ms" in data:
        value = data["delay_ms"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            _fail(where, f"delay_ms must be a number >= 0, got {value!r}")
        delay = value / 1000
    return chunk, delay


def _string(where: str, value, key: str) -> str:
    if not isinstance(value, str):
        _fail(where, f"{key} must be a string, got {type(value).__name__}")
    return value


def _step(where: str, data, timing: tuple[int, float]) -> Step:
    if isinstance(data, str):
        return Step("text", text=data, chunk_size=timing[0], delay=timing[1])
    if not isinstance(data, dict):
        _fail(where, f"a step is a mapping or a string, got {type(data).__name__}")
    kinds = [k for k in _STEP_KEYS if k in data]
    if len(kinds) != 1:
        _fail(where, "a step has exactly one of text, thinking, tool_call, pause_ms")
    kind = kinds[0]
    _unknown(where, data, _STEP_KEYS[kind])
    if kind == "pause_ms":
        value = data["pause_ms"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            _fail(where, f"pause_ms must be a number >= 0, got {value!r}")
        until_file = _string(where, data["until_file"], "until_file") if "until_file" in data else ""
        return Step("pause", delay=value / 1000, until_file=until_file)
    chunk, delay = _timing(where, data, timing)
    if kind == "text":
        return Step("text", text=_string(where, data["text"], "text"), chunk_size=chunk, delay=delay)
    if kind == "thinking":
        signature = data.get("signature")
        if signature is not None:
            _string(where, signature, "signature")
        redacted = data.get("redacted", False)
        if not isinstance(redacted, bool):
            _fail(where, "redacted must be true or false")
        return Step(
            "thinking",
            text=_string(where, data["thinking"], "thinking"),
            signature=signature,
            redacted=redacted,
            chunk_size=chunk,
            delay=delay,
        )
    call = data["tool_call"]
    if not isinstance(call, dict):
        _fail(where, "tool_call must be a mapping with name, arguments and optional id")
    _unknown(f"{where}.tool_call", call, {"name", "arguments", "id"})
    name = call.get("name")
    if not isinstance(name, str) or not name:
        _fail(f"{where}.tool_call", "name must be a non-empty string")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        _fail(f"{where}.tool_call", f"arguments must be a mapping, got {type(arguments).__name__}")
    call_id = call.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        _fail(f"{where}.tool_call", "id must be a non-empty string")
    return Step("tool_call", name=name, arguments=arguments, call_id=call_id, chunk_size=chunk, delay=delay)


def _reply(where: str, data, timing: tuple[int, float]) -> Reply:
    if isinstance(data, str):
        return Reply((_step(f"{where}.steps[0]", data, timing),))
    if isinstance(data, list):
        return Reply(tuple(_step(f"{where}.steps[{i}]", s, timing) for i, s in enumerate(data)))
    if not isinstance(data, dict):
        _fail(where, f"a reply is a string, a list of steps or a mapping, got {type(data).__name__}")
    _unknown(where, data, _REPLY_KEYS)
    timing = _timing(where, data, timing)
    steps_data = data.get("steps", [])
    if not isinstance(steps_data, list):
        _fail(where, "steps must be a list")
    steps = tuple(_step(f"{where}.steps[{i}]", s, timing) for i, s in enumerate(steps_data))
    stop_reason = data.get("stop_reason")
    if stop_reason is not None and stop_reason not in _STOP_REASONS:
        _fail(where, f"stop_reason must be one of {', '.join(sorted(_STOP_REASONS))}, got {stop_reason!r}")
    error = data.get("error")
    if error is not None and (not isinstance(error, str) or not error):
        _fail(where, "error must be a non-empty string (the errorMessage)")
    usage = data.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            _fail(where, "usage must be a mapping")
        _unknown(f"{where}.usage", usage, _USAGE_KEYS)
        for key, value in usage.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                _fail(f"{where}.usage", f"{key} must be an integer >= 0, got {value!r}")
    if not steps and error is None:
        _fail(where, "a reply needs at least one step (or an error)")
    return Reply(steps, stop_reason, error, usage)


def _regex(where: str, value, key: str) -> re.Pattern:
    if not isinstance(value, str):
        _fail(where, f"{key} must be a string regex")
    try:
        return re.compile(value)
    except re.error as exc:
        _fail(where, f"{key} is not a valid regex: {exc}")


def _rule(where: str, data, timing: tuple[int, float], *, default: bool = False) -> Rule:
    if not isinstance(data, dict):
        _fail(where, f"a rule is a mapping, got {type(data).__name__}")
    _unknown(where, data, _RULE_KEYS if not default else {"replies", "reply"})
    if ("replies" in data) == ("reply" in data):
        _fail(where, "a rule has exactly one of replies (a list) or reply")
    if "reply" in data:
        replies = (_reply(f"{where}.reply", data["reply"], timing),)
    else:
        if not isinstance(data["replies"], list) or not data["replies"]:
            _fail(where, "replies must be a non-empty list")
        replies = tuple(_reply(f"{where}.replies[{i}]", r, timing) for i, r in enumerate(data["replies"]))
    contains = regex = system = None
    if not default:
        match = data.get("match")
        if isinstance(match, str):
            if not match:
                _fail(where, "match must not be empty")
            contains = match.lower()
        elif isinstance(match, dict):
            _unknown(f"{where}.match", match, {"contains", "regex", "system"})
            if not match:
                _fail(f"{where}.match", "give contains, regex and/or system")
            if "contains" in match:
                contains = _string(f"{where}.match", match["contains"], "contains").lower()
            if "regex" in match:
                regex = _regex(f"{where}.match", match["regex"], "regex")
            if "system" in match:
                system = _regex(f"{where}.match", match["system"], "system")
        else:
            _fail(where, "match is a substring or a mapping with contains / regex / system")
    return Rule(replies, contains, regex, system)


def parse_script(data) -> Script:
    """Validate rule data (already parsed from YAML/JSON) into a `Script`."""
    if not isinstance(data, dict):
        _fail("rules", f"the top level is a mapping, got {type(data).__name__}")
    _unknown("rules", data, _TOP_KEYS)
    if data.get("version", 1) != 1:
        _fail("version", f"only version 1 is known, got {data.get('version')!r}")
    timing = _timing("rules", data, (DEFAULT_CHUNK_SIZE, 0.0))
    rules_data = data.get("rules", [])
    if not isinstance(rules_data, list):
        _fail("rules", "rules must be a list")
    rules = tuple(_rule(f"rules[{i}]", r, timing) for i, r in enumerate(rules_data))
    default = _rule("default", data["default"], timing, default=True) if data.get("default") is not None else None
    if not rules and default is None:
        _fail("rules", "give at least one rule or a default")
    return Script(rules, default)


_file_cache: dict[str, tuple[tuple, Script]] = {}
_cache_lock = threading.Lock()
_parse_lock = threading.Lock()  # held while a rules file is parsed


def resolve_rules_path(value: str | os.PathLike) -> Path:
    """A relative path is taken from the working directory, else from this package."""
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path
    packaged = PACKAGE_DIR / path
    return packaged if packaged.exists() else path


def load_script(source=None) -> Script:
    """Rules from a dict, a YAML/JSON file path, or (None) the demo rules. Raises ScriptedRulesError."""
    if source is None:
        source = DEMO_RULES
    if isinstance(source, dict):
        return parse_script(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ScriptedRulesError(f"rules: give a mapping or a file path, got {type(source).__name__}")
    path = resolve_rules_path(source)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ScriptedRulesError(f"rules file {path}: {exc.strerror or exc}") from None
    key = (stat.st_mtime_ns, stat.st_size)
    with _cache_lock:
        cached = _file_cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    # One thread parses a file, the others wait for its result: a runs worker's first burst of
    # turns (a hundred threads at once) parsed the demo rules once each.
    with _parse_lock:
        with _cache_lock:
            cached = _file_cache.get(str(path))
        if cached is not None and cached[0] == key:
            return cached[1]
        script = _parse_file(path)
        with _cache_lock:
            _file_cache[str(path)] = (key, script)
    return script


def _parse_file(path) -> Script:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # only for a YAML rules file

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - json ValueError, yaml.YAMLError
        raise ScriptedRulesError(f"rules file {path}: cannot parse: {exc}") from None
    try:
        return parse_script(data)
    except ScriptedRulesError as exc:
        raise ScriptedRulesError(f"rules file {path}: {exc}") from None


# -- streaming ------------------------------------------------------------------------------


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def conversation_position(messages: list[dict]) -> tuple[str, int]:
    """(text of the last user message, number of assistant messages after it)."""
    calls = 0
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "user":
            return _content_text(message.get("content")), calls
        if role == "assistant":
            calls += 1
    return "", calls


def _chunks(text: str, size: int) -> Iterator[str]:
    if size <= 0 or len(text) <= size:
        yield text
        return
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _overrides(options: dict) -> tuple[float | None, int | None]:
    """`delay_ms` / `chunk_size` in ModelSpec.options override every step (not pauses)."""
    if "delay_ms" not in options and "chunk_size" not in options:
        return None, None
    chunk, delay = _timing("options", options, (-1, -1.0))
    return (None if delay < 0 else delay), (None if chunk < 0 else chunk)


def _last_tool_result(messages: list[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "toolResult":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(b.get("text") or "" for b in content if isinstance(b, dict) and b.get("type") == "text")
            return content if isinstance(content, str) else ""
    return ""


class ScriptedProvider:
    api = API

    def stream(self, model: ModelSpec, request: LlmRequest, cancel: threading.Event | None) -> Iterator[StreamEvent]:
        b = AssistantBuilder(api=API, provider=model.provider_name, model=model.model_id, prices=model.prices)
        if cancel is not None and cancel.is_set():
            yield b.abort()
            return
        try:
            script = load_script(model.options.get("rules"))
        except ScriptedRulesError as exc:
            yield b.fail(str(exc))
            return
        user_text, calls = conversation_position(request.messages)
        rule = script.pick(user_text, request.system_prompt or "")
        if rule is None:
            yield b.fail(NO_MATCH_MESSAGE)
            return
        reply = rule.replies[min(calls, len(rule.replies) - 1)]
        try:
            delay_override, chunk_override = _overrides(model.options)
        except ScriptedRulesError as exc:
            yield b.fail(str(exc))
            return
        input_tokens = usage_tokens(prompt_chars(request))
        b.set_usage(input=input_tokens, output=0)
        yield b.start()

        has_tool_call = False
        clock = _Schedule(cancel)
        for step in reply.steps:
            kind = step.kind
            if kind == "pause":
                if step.delay and clock.pause(step.delay, step.until_file):
                    yield b.abort()
                    return
                continue
            if kind == "tool_call":
                has_tool_call = True
                index, event = b.begin_tool_call(step.call_id or f"call_{uuid.uuid4().hex[:24]}", step.name)
                text = json.dumps(step.arguments or {}, ensure_ascii=False, separators=(",", ":"))
                delta = b.tool_call_delta
            else:
                text = step.text.replace(USER_PLACEHOLDER, user_text) if USER_PLACEHOLDER in step.text else step.text
                if RESULT_PLACEHOLDER in text:
                    text = text.replace(RESULT_PLACEHOLDER, _last_tool_result(request.messages))
                if kind == "text":
                    index, event = b.begin_text()
                    delta = b.text_delta
                else:
                    index, event = b.begin_thinking(signature=step.signature, redacted=step.redacted)
                    delta = b.thinking_delta
            yield event
            wait = step.delay if delay_override is None else delay_override
            size = step.chunk_size if chunk_override is None else chunk_override
            for chunk in _chunks(text, size):
                if clock.wait(wait):
                    yield b.abort()
                    return
                yield delta(index, chunk)
            if kind == "tool_call":
                yield b.end_tool_call(index)
            elif kind == "text":
                yield b.end_text(index)
            else:
                yield b.end_thinking(index)

        if cancel is not None and cancel.is_set():
            yield b.abort()
            return
        usage = reply.usage
        if usage is not None:
            b.set_usage(
                input=usage.get("input", input_tokens),
                output=usage.get("output", 0),
                cache_read=usage.get("cacheRead", 0),
                cache_write=usage.get("cacheWrite", 0),
            )
        else:
            b.set_usage(input=input_tokens, output=usage_tokens(output_chars(b.content)))
        if reply.error is not None:
            yield b.fail(reply.error)
            return
        yield b.done(reply.stop_reason or ("toolUse" if has_tool_call else "stop"))


class _Schedule:
    """When a scripted stream's deltas are due: each ``delay`` after the one before, on
    the clock from the call's start, so time spent waiting for the interpreter (fifty
    streams share it) does not add up into a slower stream. It sleeps until the next
    delta is due, but at least ``PACE_SECONDS``; the deltas due by then go out together.
    A pause moves the schedule; cancel ends any wait at once."""

    def __init__(self, cancel: threading.Event | None, clock=time.monotonic):
        self.cancel = cancel
        self.clock = clock
        self.due = clock()

    def wait(self, seconds: float) -> bool:
        """Until the next delta, ``seconds`` after the last one was due; True when cancelled."""
        cancel = self.cancel
        if not seconds:
            return cancel is not None and cancel.is_set()
        self.due += seconds
        left = self.due - self.clock()
        if left <= 0:
            return cancel is not None and cancel.is_set()
        return self._sleep(max(left, PACE_SECONDS))

    def pause(self, seconds: float, until_file: str = "") -> bool:
        """A pause step: ``seconds``, or less once ``until_file`` exists (looked for every
        50 ms). The schedule goes on from its end. True when cancelled."""
        try:
            if not until_file:
                return self._sleep(seconds)
            deadline = self.clock() + seconds
            while not os.path.exists(until_file):
                left = deadline - self.clock()
                if left <= 0:
                    return False
                if self._sleep(min(left, 0.05)):
                    return True
            return False
        finally:
            self.due = self.clock()

    def _sleep(self, seconds: float) -> bool:
        if self.cancel is None:
            time.sleep(seconds)
            return False
        return self.cancel.wait(seconds)
