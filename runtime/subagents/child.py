"""The subagent child process: ``python -m runtime.subagents.child [--parent-pid PID]``.

It reads the task envelope from its first stdin line, runs its own turn loop over an
in-memory context (no database, no session store: it cannot write the tree or move a
leaf), and writes JSONL events on stdout (:mod:`runtime.subagents.protocol`). Stdin then
carries ``cancel`` and ``proxy_response`` lines.

* **Tools.** ``worker-local`` tools (the toolcatalog builtins) run here, with the
  parent's confinement: same workspace roots and cwd, the parent's resolved sandbox mode,
  its protected paths and its NETA_* tool settings (all from the envelope).
  ``main-process-proxy`` tools (read_skill, read_skill_file …) go to the host as
  ``proxy_request`` and the child waits for the ``proxy_response`` (or a cancel).
* **Approvals.** The envelope's ``approval`` block says which calls wait for a person
  (``runtime.runs.approvals``' rules: the mode, the session's "allow" rules). Such a call
  is sent as ``approval_request`` and the child waits (heartbeat phase ``approval``) for
  the host's ``approval_response`` or a cancel; a denial is the call's error result. In
  ``plan_only`` the changing tools are not offered and a changing call is refused.
* **Django.** The tool code reads a few settings through ``django.conf.settings``. The
  child never imports the project's settings module: it calls
  ``settings.configure(**envelope tool settings)`` — plain values, no apps, no database,
  no ``django.setup()``, no ``NETA_SECRET_KEY``.
* **Limits.** Turns, tool calls, tokens, cost and wall clock (the envelope's ``limits``
  and ``deadline``) are enforced here too; a stop is ``run_end`` status ``partial`` with
  the text written so far. The host enforces wall clock and idle again.
* **Cancel.** A ``cancel`` line (or stdin closing: the host is gone) sets one flag that
  the model stream, the tools and a proxy wait all watch: the child stops within one
  LLM step and ends with ``run_error`` ``cancelled`` (or, for a budget reason from the
  host, ``run_end`` ``partial``), keeping its partial output.
* **Dies with its parent.** ``PR_SET_PDEATHSIG`` (SIGKILL) is set first thing, then the
  parent pid is checked against ``--parent-pid`` (no window where the parent died
  unnoticed).

Anything a library prints to stdout goes to stderr instead: fd 1 is moved to stderr at
start and events use a private copy of the original pipe.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from typing import IO, Any

from runtime.subagents.envelope import (
    MAX_ENVELOPE_BYTES,
    EnvelopeError,
    TaskEnvelope,
    parse_envelope,
)
from runtime.subagents.protocol import (
    BUDGET_CODES,
    MAX_BLOB_BYTES,
    MAX_MESSAGE_TEXT_CHARS,
    EventWriter,
    ProtocolError,
    check_host_message,
    encode_line,
    now_ms,
    preview,
)

PR_SET_PDEATHSIG = 1
# A delta event at most every 100 ms, or sooner once this much text waits: a child writing
# fast sends a few large deltas, not thousands of small ones (each is a row and a frame).
DELTA_FLUSH_CHARS = 4096
DELTA_FLUSH_SECONDS = 0.1
ABORTED_TOOL_TEXT = "Tool call aborted: the subagent was stopped before it could run."
PLAN_ONLY_TEXT = (
    "Refused: this subagent runs in plan-only mode, where no tool that changes something runs. "
    "Describe the change you would make instead."
)
EXIT_OK, EXIT_INTERNAL, EXIT_BAD_ENVELOPE = 0, 1, 2
FIRST_TOKEN_EVENTS = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})  # as the turn loop's


def die_with_parent(expected_parent: int | None) -> None:
    """SIGKILL this process when the thread that forked it ends; exit now if it already did."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the closed stdin still ends the run
        pass
    if expected_parent and os.getppid() != expected_parent:
        os._exit(EXIT_INTERNAL)


def configure_tool_settings(envelope: TaskEnvelope) -> None:
    """The tool settings the parent runs with, without the project's settings module."""
    from django.conf import (
        settings,  # the child's start-up loads no Django until its settings are configured
    )

    if not settings.configured:
        sandbox = envelope.runtime_config.sandbox
        settings.configure(NETA_SANDBOX=sandbox.mode, **sandbox.tool_settings)
    # The child's own model key is in its environment: no tool of the child is ever handed it.
    from toolcatalog.environment import set_key_names

    key = envelope.runtime_config.model.api_key_env
    set_key_names("model", (lambda: {key: "the API key of the child's model"}) if key else None)


def _text_of(message: dict) -> str:
    return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def _bounded_message(message: dict) -> dict:
    """The message for the event stream: every text/thinking block capped (the child's
    final text travels whole in the terminal event)."""
    out = dict(message)
    blocks = []
    for block in message.get("content") or []:
        key = "text" if block.get("type") == "text" else "thinking" if block.get("type") == "thinking" else None
        if key and len(block.get(key) or "") > MAX_MESSAGE_TEXT_CHARS:
            text, _ = preview(block[key], MAX_MESSAGE_TEXT_CHARS)
            block = {**block, key: text, "truncated": True}
        blocks.append(block)
    out["content"] = blocks
    return out


class Stop(Exception):
    """Ends the loop with a terminal event."""

    def __init__(self, kind: str, **payload: Any):
        super().__init__(kind)
        self.kind = kind  # run_end | run_error
        self.payload = payload


class Child:
    def __init__(self, envelope: TaskEnvelope, writer: EventWriter, stdin: IO[bytes]):
        from runtime import (
            llm,  # here, not at the top: the child's start-up (spawn → run_start) stays light
        )

        self.llm = llm
        self.envelope = envelope
        self.writer = writer
        self.stdin = stdin
        self.limits = envelope.limits
        self.cancel = threading.Event()
        self.cancel_reason: str | None = None
        self._reason_lock = threading.Lock()
        self.phase = "starting"
        self.usage = llm.empty_usage()
        self.counts = {"turns": 0, "toolCalls": 0, "proxyCalls": 0, "toolErrors": 0}
        self.messages: list[dict] = []
        self.texts: list[str] = []
        self._proxy_lock = threading.Condition()
        self._proxy_answers: dict[str, dict] = {}
        self._approval_answers: dict[str, dict] = {}
        self._rules: tuple | None = None  # the session's "allow" rules (runs.approvals.Rule), read on first use
        self._done = threading.Event()
        self._blobs_sent: set[str] = set()  # digests whose text went with an earlier model_call
        self._first_token: int | None = None
        self._transient = False  # whether the last call failed in a way that may pass
        self.started = time.monotonic()
        self.spec = self._model_spec()
        self.tools = self._tools()

    # -- setup -------------------------------------------------------------------------

    def _model_spec(self):
        ref = self.envelope.runtime_config.model
        api_key = os.environ.get(ref.api_key_env) if ref.api_key_env else None
        return self.llm.ModelSpec(
            provider_kind=ref.provider_kind,
            model_id=ref.model_id,
            provider_name=ref.provider_name,
            base_url=ref.base_url,
            api_key=api_key,
            context_window=ref.context_window,
            max_output_tokens=ref.max_output_tokens,
            supports_tools=ref.supports_tools,
            supports_thinking=ref.supports_thinking,
            supports_images=ref.supports_images,
            prices=dict(ref.prices),
            options=dict(ref.options),
        )

    def _tools(self) -> dict[str, tuple[str, Any, dict]]:
        """name → (route, tool instance or None, definition). Raises EnvelopeError."""
        import toolcatalog.builtins  # noqa: F401 - registers the worker-local tools (loaded on first use: a light start-up)
        from toolcatalog.protocol import UnknownTool, get_tool

        out = {}
        for i, grant in enumerate(self.envelope.tool_policy.tools):
            if grant.route == "main-process-proxy":
                out[grant.name] = (grant.route, None, grant.definition())
                continue
            try:
                tool = get_tool(grant.name)
            except UnknownTool:
                raise EnvelopeError(
                    f"envelope.toolPolicy.tools[{i}]: {grant.name!r} is not a tool this child can run (route worker-local)"
                ) from None
            if not tool.manifest.supported_in_worker:
                raise EnvelopeError(f"envelope.toolPolicy.tools[{i}]: {grant.name!r} cannot run inside a worker process")
            definition = {"name": tool.name, "description": grant.description or tool.description, "parameters": tool.parameters}
            out[grant.name] = (grant.route, tool, definition)
        return out

    def system_prompt(self) -> str:
        prompt = self.envelope.restricted_system_prompt
        summary = self.envelope.context_summary.strip()
        if summary:
            prompt = f"{prompt}\n\n<parent_context>\n{summary}\n</parent_context>" if prompt else f"<parent_context>\n{summary}\n</parent_context>"
        return prompt

    # -- threads -----------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        with self._reason_lock:
            if self.cancel_reason is None:
                self.cancel_reason = reason
        self.cancel.set()
        with self._proxy_lock:
            self._proxy_lock.notify_all()

    def _read_stdin(self) -> None:
        while True:
            try:
                line = self.stdin.readline(MAX_ENVELOPE_BYTES)
            except (OSError, ValueError):
                line = b""
            if not line:
                if not self._done.is_set():
                    self.request_stop("cancelled")  # the host closed stdin or died
                return
            if not line.strip():
                continue
            try:
                message = check_host_message(json.loads(line))
            except (ValueError, ProtocolError) as exc:
                print(f"neta-subagent: ignored a bad host message: {exc}", file=sys.stderr, flush=True)
                continue
            if message["type"] == "cancel":
                self.request_stop(message.get("reason", "cancelled"))
            elif message["type"] == "approval_response":
                with self._proxy_lock:
                    self._approval_answers[message["requestId"]] = message
                    self._proxy_lock.notify_all()
            else:
                with self._proxy_lock:
                    self._proxy_answers[message["requestId"]] = message["result"]
                    self._proxy_lock.notify_all()

    def _heartbeat(self) -> None:
        while not self._done.wait(self.limits.heartbeat_seconds):
            self.writer.emit("heartbeat", phase=self.phase, usage=self.usage, counts=dict(self.counts))

    def _wall_clock(self) -> None:
        budget = self.limits.wall_clock_seconds
        if self.envelope.deadline is not None:
            budget = min(budget, max(0.0, self.envelope.deadline / 1000 - time.time()))
        if not self._done.wait(budget):
            self.request_stop("budget_wall_clock")

    # -- the run -----------------------------------------------------------------------

    def run(self) -> dict:
        for target, name in ((self._read_stdin, "stdin"), (self._heartbeat, "heartbeat"), (self._wall_clock, "wall-clock")):
            threading.Thread(target=target, name=f"subagent-{name}", daemon=True).start()
        self.writer.emit(
            "run_start",
            agent=self.envelope.agent,
            depth=self.envelope.depth,
            pid=os.getpid(),
            model=self.spec.model_id,
            tools=[{"name": n, "route": r} for n, (r, _, _) in self.tools.items()],
        )
        try:
            self._loop()
        except Stop as stop:
            kind, payload = stop.kind, stop.payload
        except Exception as exc:  # noqa: BLE001 - a bug here still ends the run with one terminal event
            traceback.print_exc(file=sys.stderr)
            kind, payload = "run_error", {"code": "child_crash", "message": f"{type(exc).__name__}: {exc}", "partialText": self.partial_text()}
        else:  # pragma: no cover - _loop always raises Stop
            kind, payload = "run_error", {"code": "protocol_error", "message": "the loop ended without a result"}
        self.phase = "finishing"
        self._done.set()
        return self.writer.emit(kind, usage=self.usage, counts=dict(self.counts), **payload)

    def partial_text(self) -> str:
        return "\n\n".join(t for t in self.texts if t)

    def _stopped(self) -> Stop:
        """The terminal event for a raised cancel flag."""
        reason = self.cancel_reason or "cancelled"
        if reason in BUDGET_CODES:
            return self._partial(reason)
        return Stop("run_error", code="cancelled", message="the subagent was cancelled", partialText=self.partial_text())

    def _partial(self, reason: str) -> Stop:
        return Stop("run_end", status="partial", stopReason=reason, finalText=self.partial_text())

    def _loop(self) -> None:
        from runtime.llm.thinking import (
            clamp_thinking,  # as ``llm`` itself: loaded once the child runs
        )

        llm = self.llm
        definitions = [d for name, (_, _, d) in self.tools.items() if not self._hidden_in_plan_mode(name)] if self.spec.supports_tools else []
        self.messages.append({"role": "user", "content": [{"type": "text", "text": self.envelope.task}], "timestamp": int(time.time() * 1000)})
        system_prompt = self.system_prompt()
        while True:
            if self.cancel.is_set():
                raise self._stopped()
            self.counts["turns"] += 1
            turn = self.counts["turns"]
            request = llm.LlmRequest(
                system_prompt=system_prompt,
                messages=list(self.messages),
                tools=definitions,
                # Clamped to the levels the child's model accepts (runtime/llm/thinking.py).
                thinking_level=clamp_thinking(self.spec, self.envelope.runtime_config.thinking_level).level,
                max_tokens=self.spec.max_output_tokens,
            )
            self.phase = "model"
            retries = 0
            while True:
                context_seq, started = self.writer.seq, now_ms()
                final = self._stream(turn, request)
                self._add_usage(final.get("usage") or {})
                stop = final.get("stopReason")
                self.writer.emit("assistant_message", turn=turn, stopReason=stop, message=_bounded_message(final))
                self._emit_model_call(turn, request, final, started=started, context_seq=context_seq)
                if not self._retry_after(final, retries):
                    break
                retries += 1
            text = _text_of(final)
            self.texts.append(text)
            if stop == "aborted" or self.cancel.is_set():
                raise self._stopped()
            if stop == "error":
                raise Stop("run_error", code="llm_error", message=final.get("errorMessage") or "the model returned an error", partialText=self.partial_text())
            self.messages.append(final)
            self._check_usage_budgets()
            calls = [b for b in final.get("content") or [] if b.get("type") == "toolCall"]
            if not (calls and stop == "toolUse"):
                raise Stop("run_end", status="completed", stopReason=stop or "stop", finalText=text)
            if turn >= self.limits.max_turns:
                raise self._partial("budget_turns")
            for call in calls:
                if self.cancel.is_set():
                    raise self._stopped()
                if self.counts["toolCalls"] >= self.limits.max_tool_calls:
                    raise self._partial("budget_tool_calls")
                self.counts["toolCalls"] += 1
                self.messages.append(self._run_call(turn, call))

    def _retry_after(self, final: dict, retries: int) -> bool:
        """After a call ended in ``final``: whether it is made again, as the parent's turn does
        (runtime/runs/retries.py) — a failure that may pass (``transient``) after the output
        began, fewer than ``llmRetries`` times so far; the wait (base × 2^n) ends at a cancel.
        The broken reply stays in the events (``assistant_message`` with ``stopReason: error``)
        and never enters the child's context."""
        config = self.envelope.runtime_config
        if final.get("stopReason") != "error" or not self._transient or not final.get("content") or retries >= config.llm_retries:
            return False
        self._check_usage_budgets()  # the broken reply's tokens count: a spent budget ends here
        wait = config.llm_retry_base_ms * (2**retries) / 1000
        return not self.cancel.wait(wait)

    def _check_usage_budgets(self) -> None:
        limits = self.limits
        if limits.max_tokens is not None and self.usage["totalTokens"] >= limits.max_tokens:
            raise self._partial("budget_tokens")
        if limits.max_cost is not None and self.usage["cost"]["total"] >= limits.max_cost:
            raise self._partial("budget_cost")

    def _add_usage(self, usage: dict) -> None:
        for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
            self.usage[key] += int(usage.get(key) or 0)
        for key, value in (usage.get("cost") or {}).items():
            if key in self.usage["cost"] and isinstance(value, (int, float)):
                self.usage["cost"][key] += value

    def _stream(self, turn: int, request) -> dict:
        pending: list[str] = []
        pending_chars = 0
        pending_kind: str | None = None
        pending_index: int | None = None
        last_flush = time.monotonic()

        def flush() -> None:
            nonlocal pending, pending_chars, last_flush
            if pending:
                self.writer.emit("assistant_delta", turn=turn, contentIndex=pending_index, kind=pending_kind, delta="".join(pending))
                pending, pending_chars = [], 0
            last_flush = time.monotonic()

        final: dict | None = None
        partial: dict | None = None
        self._first_token = None
        self._transient = False
        try:
            for event in self.llm.stream(self.spec, request, cancel=self.cancel):
                partial = event.partial or partial
                if self._first_token is None and event.type in FIRST_TOKEN_EVENTS:
                    self._first_token = now_ms()
                if event.type in ("text_delta", "thinking_delta"):
                    kind = "text" if event.type == "text_delta" else "thinking"
                    if (kind, event.content_index) != (pending_kind, pending_index):
                        flush()
                        pending_kind, pending_index = kind, event.content_index
                    pending.append(event.delta)
                    pending_chars += len(event.delta)
                    if pending_chars >= DELTA_FLUSH_CHARS or time.monotonic() - last_flush >= DELTA_FLUSH_SECONDS:
                        flush()
                elif event.type in ("text_end", "thinking_end", "toolcall_start"):
                    flush()
                elif event.type in ("done", "error"):
                    final = event.message
                    self._transient = event.type == "error" and bool(getattr(event, "transient", False))
        except Exception as exc:  # noqa: BLE001 - the LLM layer promises not to raise; be safe anyway
            final = {**(partial or {"role": "assistant", "content": []}), "stopReason": "error", "errorMessage": f"{type(exc).__name__}: {exc}"}
        flush()
        if final is None:
            final = {**(partial or {"role": "assistant", "content": []}), "stopReason": "aborted" if self.cancel.is_set() else "error"}
            final.setdefault("errorMessage", "the model stream ended without a final message")
        return final

    def _emit_model_call(self, turn: int, request, final: dict, *, started: int, context_seq: int) -> None:
        """The call just made, for its trace record on the host: who answered, when, how it
        ended, and its request by reference (the texts of its system prompt and tools the
        first time this run sends them)."""
        from urllib.parse import (
            urlsplit,  # as ``llm``: loaded once the child runs
        )

        from runtime.llm.bodies import (  # as ``llm``: loaded once the child runs
            digest,
            request_settings,
            tools_text,
        )

        system, tools = request.system_prompt, tools_text(request.tools)
        blobs = {}
        for text in (system, tools):
            key = digest(text)
            if key not in self._blobs_sent and len(encode_line({"t": text})) <= MAX_BLOB_BYTES:
                blobs[key] = text
            self._blobs_sent.add(key)
        ref = self.envelope.runtime_config.model
        call = {
            "model": ref.name or ref.model_id, "modelId": self.spec.model_id, "provider": self.spec.provider_name, "api": self.spec.api,
            "endpoint": urlsplit(self.spec.base_url or "").hostname or "",
            "startedAt": started, "firstTokenAt": self._first_token, "finishedAt": now_ms(),
            "stopReason": final.get("stopReason") or "", "usage": final.get("usage") or {}, "error": final.get("errorMessage") or "",
            "settings": request_settings(request), "systemDigest": digest(system), "toolsDigest": digest(tools), "contextSeq": context_seq,
        }  # fmt: skip
        self.writer.emit("model_call", turn=turn, call=call, blobs=blobs)

    def _run_call(self, turn: int, call: dict) -> dict:
        from toolcatalog.protocol import (
            ToolResult,  # loaded on first use: a light start-up
        )

        call_id, name, arguments = call.get("id") or "", call.get("name") or "", call.get("arguments") or {}
        entry = self.tools.get(name)
        route = entry[0] if entry else "refused"
        self.writer.emit("tool_call", turn=turn, toolCallId=call_id, name=name, arguments=arguments, route=route)
        if entry is None:
            result = ToolResult.error(f"tool {name!r} is not available to this subagent")
        elif self.cancel.is_set():
            result = ToolResult.error(ABORTED_TOOL_TEXT)
        elif (refusal := self._approval(call_id, name, arguments, entry)) is not None:
            result = refusal
        elif route == "main-process-proxy":
            result = self._proxy(call_id, name, arguments)
        else:
            result = self._run_local(entry[1], arguments)
        if result.is_error:
            self.counts["toolErrors"] += 1
        text = result.text_output()
        shown, truncated = preview(text)
        self.writer.emit(
            "tool_result",
            toolCallId=call_id,
            name=name,
            isError=result.is_error,
            preview=shown,
            truncated=truncated,
            chars=len(text),
            details=_bounded_details(result.details),
        )
        return result.to_pi_tool_result(call_id, name)

    # -- approvals ------------------------------------------------------------------------

    def _classified(self, name: str):
        """The tool as the approval rules see it: the builtin itself, or for a proxy tool a
        stand-in that changes something when the host said so (the child has no registry)."""
        route, tool, _ = self.tools[name]
        if route != "main-process-proxy":
            return tool
        changing = name in self.envelope.approval.changing_proxy_tools
        return _ProxyTool(name, changing)

    def _hidden_in_plan_mode(self, name: str) -> bool:
        if self.envelope.approval.mode != "plan_only":
            return False
        from runtime.runs import (
            approvals,  # the parent's approval rules, loaded once the child runs (a light start-up)
        )

        return approvals.refused_in_plan_mode(self._classified(name), {})

    def _approval(self, call_id: str, name: str, arguments: dict, entry):
        """None: the call runs. Otherwise its error result: refused (plan-only), denied or expired."""
        policy = self.envelope.approval
        if policy.mode == "auto" or entry is None:
            return None
        from runtime.runs import (
            approvals,  # the parent's approval rules, loaded once the child runs (a light start-up)
        )
        from toolcatalog.protocol import (
            ToolResult,  # loaded on first use: a light start-up
        )

        tool = self._classified(name)
        args = arguments if isinstance(arguments, dict) else {}
        if policy.mode == "plan_only":
            return ToolResult.error(PLAN_ONLY_TEXT) if approvals.refused_in_plan_mode(tool, args) else None
        if self._rules is None:
            self._rules = tuple(approvals.Rule(tool=r.tool, prefix=r.prefix) for r in policy.rules)
        if not approvals.needs_approval(policy.mode, tool, name, args, self._rules):
            return None
        preview = self._preview(entry[1], args) if entry[1] is not None else None
        request = approvals.request_for({"id": call_id, "name": name, "arguments": args}, mode=policy.mode, cwd=self.envelope.runtime_config.cwd, preview=preview)
        request_id = uuid.uuid4().hex
        previous, self.phase = self.phase, "approval"
        self.writer.emit("approval_request", requestId=request_id, toolCallId=call_id, name=name, request=request)
        with self._proxy_lock:
            while request_id not in self._approval_answers and not self.cancel.is_set():
                self._proxy_lock.wait(0.5)
            answer = self._approval_answers.pop(request_id, None)
        self.phase = previous
        if answer is None:
            return ToolResult.error(ABORTED_TOOL_TEXT)
        if answer["decision"] != "allow":
            return ToolResult.error(answer.get("text") or "Not run: the call was denied.")
        if answer.get("scope") == "session":  # later calls of this child that match run without asking
            self._rules = (*self._rules, approvals.Rule(tool=name, prefix=answer.get("prefix") or ""))
        return None

    def _run_local(self, tool, arguments: dict):
        from toolcatalog.protocol import ToolResult, run_tool  # loaded on first use: a light start-up

        self.phase = "tool"
        try:
            ctx = self._tool_context()
        except ValueError as exc:
            return ToolResult.error(f"the subagent's workspace is not usable: {exc}")
        return run_tool(tool, ctx, arguments)

    def _tool_context(self):
        """The context the child's own tools run in. Raises ValueError for an unusable workspace."""
        from toolcatalog.protocol import ToolContext  # loaded on first use: a light start-up

        configure_tool_settings(self.envelope)  # before the first tool reads a setting; Django's import waits till then
        config = self.envelope.runtime_config
        policy = self.envelope.tool_policy
        return ToolContext(
            roots=tuple(config.workspace_roots),
            cwd=config.cwd,
            cancel=self.cancel,
            env_passthrough=policy.env_passthrough,
            network=policy.network,
            sandbox=config.sandbox.mode,
            protected=tuple(config.sandbox.protected_paths),
            for_subagent=True,  # a typed field of the context, no longer a key of extras
        )

    def _preview(self, tool, arguments: dict) -> dict | None:
        """The tool's preview for an approval request (an edit's diff against the file)."""
        from toolcatalog.protocol import preview_for_approval  # loaded on first use: a light start-up

        try:
            return preview_for_approval(tool, self._tool_context(), arguments)
        except ValueError:
            return None

    def _proxy(self, call_id: str, name: str, arguments: dict):
        from toolcatalog.protocol import (
            ToolResult,  # loaded on first use: a light start-up
        )

        self.phase = "proxy"
        self.counts["proxyCalls"] += 1
        request_id = uuid.uuid4().hex
        self.writer.emit("proxy_request", requestId=request_id, toolCallId=call_id, name=name, arguments=arguments)
        with self._proxy_lock:
            while request_id not in self._proxy_answers and not self.cancel.is_set():
                self._proxy_lock.wait(0.5)
            answer = self._proxy_answers.pop(request_id, None)
        if answer is None:
            return ToolResult.error(ABORTED_TOOL_TEXT)
        content = [b for b in answer.get("content") or [] if isinstance(b, dict) and b.get("type") in ("text", "image")]
        details = answer.get("details") if isinstance(answer.get("details"), dict) else None
        return ToolResult(content=content, details=details, is_error=bool(answer.get("isError")))


class _ProxyTool:
    """A proxy tool as the approval rules read it (``changes_with``)."""

    def __init__(self, name: str, changing: bool):
        self.name = name
        self.changes = changing

    def changes_with(self, args: dict) -> bool:
        return self.changes


def _bounded_details(details: dict | None) -> dict | None:
    """Tool details for the event (a full output is referenced by its path, never inlined)."""
    if not details:
        return None
    encoded = json.dumps(details, ensure_ascii=False, default=str)
    if len(encoded) <= 4000:
        return details
    keep = {k: v for k, v in details.items() if isinstance(v, (int, float, bool, str)) and len(str(v)) <= 500}
    keep["truncated"] = True
    return keep


def _event_stream() -> IO[bytes]:
    """A private copy of stdout for events; fd 1 itself now points at stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb", buffering=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.subagents.child", description="Neta subagent child process")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit at once unless this is the parent's pid")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    out = _event_stream()
    stdin = sys.stdin.buffer
    line = stdin.readline(MAX_ENVELOPE_BYTES + 1)
    try:
        envelope = parse_envelope(line)
    except EnvelopeError as exc:
        EventWriter(out, _run_id_guess(line)).emit("run_error", code="bad_envelope", message=str(exc), partialText="")
        return EXIT_BAD_ENVELOPE
    writer = EventWriter(out, envelope.run_id)
    # The process's tools check their schemas at each tool's first call (no jsonschema at start);
    # set here, for the whole child process, before Child registers the builtins.
    from toolcatalog import protocol  # loaded on first use: a light start-up

    protocol.defer_schema_checks()
    try:
        child = Child(envelope, writer, stdin)
    except EnvelopeError as exc:
        writer.emit("run_error", code="bad_envelope", message=str(exc), partialText="")
        return EXIT_BAD_ENVELOPE
    child.run()
    return EXIT_OK


def _run_id_guess(line: bytes) -> str:
    try:
        value = json.loads(line).get("runId")
        return value if isinstance(value, str) else ""
    except Exception:  # noqa: BLE001
        return ""


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Not sys.exit: the stdin reader is a daemon thread blocked in a read, and a normal
    # interpreter shutdown aborts on its buffer lock. Events are written unbuffered.
    os._exit(code)
