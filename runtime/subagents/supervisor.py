"""The host side of one subagent child: start it, feed it, watch it, stop it, reap it.

    supervisor = ChildSupervisor(envelope, on_event=record, on_proxy_request=run_skill_tool)
    outcome = supervisor.run()          # or start() … cancel() … wait()
    outcome.terminal                    # exactly one run_end / run_error, always

Process rules (docs/subagents.md, "The supervisor"):

* argv list (``python -P -m runtime.subagents.child --parent-pid <pid>``), no shell;
  ``start_new_session=True`` (its own session and process group); the workspace as cwd;
  a scrubbed environment (:func:`child_environment`: PATH, HOME, TMPDIR, LANG/LC_*, TZ,
  PYTHONPATH for this code, and only the one API-key variable its model names — never
  NETA_* / DJANGO_* / database or other keys); ``PR_SET_PDEATHSIG`` set by the child
  first thing and checked against ``--parent-pid``, so it dies with the supervisor. The
  child is forked by the supervisor's own monitor thread, which lives until the child is
  reaped (PDEATHSIG follows the forking *thread*).
* One monitor thread reads stdout and stderr together (a selector over both, so neither
  pipe fills and blocks the child), parses events, keeps non-protocol lines
  (:class:`~runtime.subagents.protocol.NoiseLog`) and the stderr tail, and applies the
  host-side limits: idle (no event for ``limits.idleSeconds``, or ``Timings.startup``
  before the first one → SIGKILL of the group, ``stalled``) and wall clock (``wallClockSeconds`` / ``deadline`` plus a grace → a
  ``cancel`` with reason ``budget_wall_clock``).
* ``cancel()``: a ``cancel`` line at once, SIGTERM to the process group after 3 s, SIGKILL
  after 8 s, each only while the child has not really exited (``waitid(WNOWAIT)``; the
  group is killed once more after the exit, before the pid is reaped, for leftovers).
* A child that exits without a terminal event gets a synthetic ``run_error``
  (``child_crash`` with exit code or signal and stderr tail; ``cancelled`` /
  ``budget_wall_clock`` when the host was stopping it; ``stalled`` after an idle kill).
* ``proxy_request`` events are re-checked against the envelope (a granted
  ``main-process-proxy`` tool) and handed to ``on_proxy_request(event) -> result`` in a
  thread of their own; the answer is written back as ``proxy_response``.
* ``approval_request`` events go to ``on_approval_request(event) -> {decision, text, scope,
  prefix}`` in a thread of their own (it waits for a person); the answer is written back as
  ``approval_response`` (no handler: denied).

Callbacks run in the monitor thread (``on_event``, ``on_noise``): keep them short (batch
database writes elsewhere); an exception in one is logged, never fatal to the run.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.subagents.envelope import TaskEnvelope
from infra.cpu_affinity import unpin_thread
from toolcatalog.environment import server_setting_reason
from runtime.subagents.protocol import (
    PROTOCOL_VERSION,
    TERMINAL_TYPES,
    ByteTail,
    LineReader,
    NoiseLog,
    TextParts,
    approval_response_message,
    cancel_message,
    decode_line,
    encode_line,
    now_ms,
    proxy_response_message,
)

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
CHILD_MODULE = "runtime.subagents.child"
#: Variables a child gets from the host's environment when they are set.
PASSED_VARIABLES = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ")

EventCallback = Callable[[dict], None]
ProxyHandler = Callable[[dict], Mapping[str, Any]]


class SupervisorError(RuntimeError):
    """The child cannot be started as asked (a host bug, said before anything runs)."""


@dataclass(frozen=True)
class Timings:
    term_after: float = 3.0  # cancel → SIGTERM to the group
    kill_after: float = 8.0  # cancel → SIGKILL to the group
    wall_clock_grace: float = 2.0  # the child stops itself first; the host a little later
    exit_grace: float = 5.0  # after the terminal event, how long the child may take to exit
    drain_after_exit: float = 1.0  # reading what is left in the pipes after the exit
    startup: float = 30.0  # the idle limit before the first event (Python start-up, imports)
    poll: float = 0.05


@dataclass
class RunOutcome:
    terminal: dict
    pid: int | None
    exit_code: int | None  # None when it died of a signal
    signal: int | None
    stderr_tail: str
    noise: dict
    event_count: int
    partial_text: str
    cancelled_by: str | None
    duration: float
    killed: list[str] = field(default_factory=list)  # "SIGTERM", "SIGKILL", in order

    @property
    def synthetic(self) -> bool:
        return bool(self.terminal.get("synthetic"))


def child_environment(envelope: TaskEnvelope, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of the child: nothing the host has unless named here."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in PASSED_VARIABLES if name in source}
    env.setdefault("PATH", os.defpath)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONSAFEPATH"] = "1"  # the workspace (cwd) is never on the child's sys.path
    key = envelope.runtime_config.model.api_key_env
    if key:
        refused = server_setting_reason(key)  # the one rule for names (toolcatalog.environment)
        if refused:
            raise SupervisorError(f"the model's key variable is refused: {refused}; a child never gets it")
        if key in source:
            env[key] = source[key]
    return env


def child_argv(python: str | None = None) -> list[str]:
    return [python or sys.executable, "-P", "-m", CHILD_MODULE, "--parent-pid", str(os.getpid())]


class ChildSupervisor:
    def __init__(
        self,
        envelope: TaskEnvelope,
        *,
        on_event: EventCallback | None = None,
        on_proxy_request: ProxyHandler | None = None,
        on_approval_request: ProxyHandler | None = None,
        on_noise: Callable[[dict], None] | None = None,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
        timings: Timings | None = None,
    ):
        self.envelope = envelope
        self.run_id = envelope.run_id
        self.on_event = on_event
        self.on_proxy_request = on_proxy_request
        self.on_approval_request = on_approval_request
        self.on_noise = on_noise
        self.timings = timings or Timings()
        self.env = child_environment(envelope, environ)
        self.argv = child_argv(python)
        self.cwd = envelope.runtime_config.cwd
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.noise = NoiseLog()
        self.stderr = ByteTail()
        self.outcome: RunOutcome | None = None
        self._started = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self._stdin: queue.Queue[bytes | None] = queue.Queue()
        self._terminal: dict | None = None
        self._forced: tuple[str, str] | None = None  # (code, message) the host decided
        self._cancel_at: float | None = None
        self._cancel_reason = "cancelled"
        self.cancelled_by: str | None = None
        self._escalation_from: float | None = None  # cancel, or the terminal event
        self._killed: list[str] = []
        self._last_seq = 0
        self._events = 0
        self._texts: dict[int, str] = {}
        self._parts = TextParts()
        self._last_usage: dict | None = None
        self._last_counts: dict | None = None
        self._spawn_error: str | None = None
        self._monitor: threading.Thread | None = None

    # -- public ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the child (from a monitor thread that lives until it is reaped)."""
        if self._monitor is not None:
            raise SupervisorError("this supervisor already started its child")
        self._t0 = time.monotonic()
        if self._cancel_at is not None:  # cancelled before it started: it never starts
            self._spawn_error = None
            self._started.set()
            self._finish(None, None)
            self._monitor = threading.current_thread()
            return
        # The envelope goes first on stdin, whatever cancel() queues meanwhile.
        self._send_raw(self.envelope.to_json().encode("utf-8") + b"\n")
        self._monitor = threading.Thread(target=self._main, name=f"subagent-{self.run_id}", daemon=True)
        self._monitor.start()
        self._started.wait()

    def run(self) -> RunOutcome:
        self.start()
        return self.wait()

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        self._finished.wait(timeout)
        return self.outcome

    def cancel(self, reason: str = "cancelled", *, by: str = "host") -> None:
        """Ask the child to stop; escalate to SIGTERM / SIGKILL of its group if it does not."""
        with self._lock:
            if self._cancel_at is not None or self._finished.is_set():
                return
            if self._monitor is None and not hasattr(self, "_t0"):
                self._t0 = time.monotonic()
            self._cancel_at = time.monotonic()
            self._cancel_reason = reason
            self.cancelled_by = by
            if self._escalation_from is None:
                self._escalation_from = self._cancel_at
        self._send(cancel_message(reason))

    # -- the monitor thread --------------------------------------------------------------

    def _main(self) -> None:
        unpin_thread()  # the child gets every CPU, not the web process's one (infra/cpu_affinity.py)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            self._spawn_error = f"the child could not be started: {exc}"
            self._started.set()
            self._finish(None, None)
            return
        self.pid = self.proc.pid
        threading.Thread(target=self._write_stdin, name=f"subagent-{self.run_id}-stdin", daemon=True).start()
        self._started.set()
        try:
            exit_code, sig = self._watch()
        except Exception:  # noqa: BLE001 - the host never loses a run to its own bug
            logger.exception("subagent %s: supervisor failed; killing the child", self.run_id)
            self._kill_group(signal.SIGKILL)
            self._forced = self._forced or ("child_crash", "the supervisor failed while watching the child")
            exit_code, sig = self._reap_blocking()
        self._finish(exit_code, sig)

    def _watch(self) -> tuple[int | None, int | None]:
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        readers = {proc.stdout.fileno(): LineReader(), proc.stderr.fileno(): None}
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe.fileno(), selectors.EVENT_READ)
        self._last_activity = time.monotonic()
        exited: tuple[int | None, int | None] | None = None
        exited_at = 0.0
        while True:
            for key, _ in sel.select(self.timings.poll):
                fd = key.fd
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(fd)
                    reader = readers.pop(fd)
                    if reader is not None:
                        for line, oversized in reader.close():
                            self._line(line, oversized)
                    continue
                reader = readers[fd]
                if reader is None:
                    self.stderr.add(data)
                else:
                    for line, oversized in reader.feed(data):
                        self._line(line, oversized)
            now = time.monotonic()
            if exited is None:
                exited = self._exited()
                if exited is not None:
                    exited_at = now
                    self._kill_group(signal.SIGKILL, note=False)  # leftovers of the group, before the reap
            if exited is not None and (not readers or now - exited_at >= self.timings.drain_after_exit):
                break
            if exited is None:
                self._limits(now)
        sel.close()
        self.proc.wait()  # reap (the status was read with WNOWAIT)
        return exited

    def _limits(self, now: float) -> None:
        t = self.timings
        limits = self.envelope.limits
        if self._terminal is None and self._forced is None:
            idle = limits.idle_seconds if self._events else max(limits.idle_seconds, t.startup)
            if now - self._last_activity > idle:
                self._forced = ("stalled", f"no event from the child for {idle:g} s (idle limit); killed")
                self._kill_group(signal.SIGKILL)
                return
            wall = limits.wall_clock_seconds
            if self.envelope.deadline is not None:
                wall = min(wall, self.envelope.deadline / 1000 - time.time() + (now - self._t0))
            if now - self._t0 > wall + t.wall_clock_grace:
                self.cancel("budget_wall_clock", by="host:wall_clock")
        with self._lock:
            start = self._escalation_from
        if start is None:
            return
        waited = now - start
        if waited >= t.kill_after and "SIGKILL" not in self._killed:
            self._kill_group(signal.SIGKILL)
        elif waited >= t.term_after and not self._killed:
            self._kill_group(signal.SIGTERM)

    def _exited(self) -> tuple[int | None, int | None] | None:
        """(exit code, signal) once the child has really exited, without reaping it."""
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            code = self.proc.returncode
            return (code, None) if code is None or code >= 0 else (None, -code)
        if info is None:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status, None
        return None, info.si_status

    def _reap_blocking(self) -> tuple[int | None, int | None]:
        code = self.proc.wait()
        return (code, None) if code >= 0 else (None, -code)

    def _kill_group(self, sig: int, *, note: bool = True) -> None:
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if note:
            self._killed.append(signal.Signals(sig).name)

    # -- lines and events ----------------------------------------------------------------

    def _line(self, line: bytes, oversized: bool) -> None:
        event, problem = decode_line(line, oversized=oversized, run_id=self.run_id, last_seq=self._last_seq)
        if event is not None and self._terminal is not None:
            event, problem = None, f"event after the terminal {self._terminal['type']}"
        if event is None:
            if problem == "empty line":
                return
            item = self.noise.add(line, problem)
            self._callback(self.on_noise, item)
            return
        self._last_seq = event["seq"]
        self._events += 1
        self._last_activity = time.monotonic()
        if event["type"] == "text_part":  # a piece of the terminal event's text: joined there, not recorded alone
            self._parts.add(event)
            return
        if event["type"] in TERMINAL_TYPES:
            event = self._parts.complete(event)
        self._track(event)
        if event["type"] in TERMINAL_TYPES:
            self._terminal = event
            with self._lock:
                if self._escalation_from is None:  # the child should exit now; escalate if it does not
                    self._escalation_from = time.monotonic() + self.timings.exit_grace - self.timings.term_after
        elif event["type"] == "proxy_request":
            threading.Thread(target=self._proxy, args=(event,), name=f"subagent-{self.run_id}-proxy", daemon=True).start()
        elif event["type"] == "approval_request":
            threading.Thread(target=self._approval, args=(event,), name=f"subagent-{self.run_id}-approval", daemon=True).start()
        self._callback(self.on_event, event)

    def _track(self, event: dict) -> None:
        kind = event["type"]
        if kind == "assistant_delta" and event.get("kind") == "text" and isinstance(event.get("turn"), int):
            self._texts[event["turn"]] = self._texts.get(event["turn"], "") + event["delta"]
        elif kind == "assistant_message" and isinstance(event.get("turn"), int):
            content = (event.get("message") or {}).get("content") or []
            self._texts[event["turn"]] = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        if isinstance(event.get("usage"), dict):
            self._last_usage = event["usage"]
        if isinstance(event.get("counts"), dict):
            self._last_counts = event["counts"]

    def partial_text(self) -> str:
        return "\n\n".join(t for _, t in sorted(self._texts.items()) if t)

    def _callback(self, fn: Callable | None, arg: dict) -> None:
        if fn is None:
            return
        try:
            fn(arg)
        except Exception:  # noqa: BLE001 - a recording hiccup never kills the run
            logger.exception("subagent %s: callback %r failed", self.run_id, fn)

    def _proxy(self, event: dict) -> None:
        name = event.get("name")
        grant = self.envelope.tool_policy.grant(name)
        if grant is None or grant.route != "main-process-proxy":
            result = {"content": [{"type": "text", "text": f"tool {name!r} is not granted to this subagent as a proxy tool"}], "isError": True}
        elif self.on_proxy_request is None:
            result = {"content": [{"type": "text", "text": f"tool {name!r}: this host runs no proxy tools"}], "isError": True}
        else:
            try:
                answer = self.on_proxy_request(event)
                result = {"content": list(answer.get("content") or []), "isError": bool(answer.get("isError"))}
                if isinstance(answer.get("details"), dict):
                    result["details"] = answer["details"]
            except Exception as exc:  # noqa: BLE001
                logger.exception("subagent %s: proxy tool %s failed", self.run_id, name)
                result = {"content": [{"type": "text", "text": f"tool {name!r} failed on the host: {type(exc).__name__}: {exc}"}], "isError": True}
        self._send(proxy_response_message(event["requestId"], result))

    def _approval(self, event: dict) -> None:
        """``on_approval_request(event) -> {decision, text, scope, prefix}`` waits for a person
        (the host's records); without one, or when it fails, the call is denied."""
        answer = {"decision": "deny", "text": "Not run: this host decides no approvals."}
        if self.on_approval_request is not None:
            try:
                answer = self.on_approval_request(event)
            except Exception as exc:  # noqa: BLE001
                logger.exception("subagent %s: approval request failed", self.run_id)
                answer = {"decision": "deny", "text": f"Not run: the approval request failed on the host: {type(exc).__name__}: {exc}"}
        decision = "allow" if answer.get("decision") == "allow" else "deny"
        self._send(
            approval_response_message(
                event["requestId"], decision=decision, text=str(answer.get("text") or ""),
                scope="session" if answer.get("scope") == "session" else "once", prefix=str(answer.get("prefix") or ""),
            )
        )  # fmt: skip

    # -- stdin -----------------------------------------------------------------------------

    def _send(self, message: dict) -> None:
        self._send_raw(encode_line(message))

    def _send_raw(self, data: bytes) -> None:
        self._stdin.put(data)

    def _write_stdin(self) -> None:
        stdin = self.proc.stdin
        while True:
            data = self._stdin.get()
            if data is None:
                break
            try:
                stdin.write(data)
                stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                break
        try:
            stdin.close()
        except (BrokenPipeError, OSError):
            pass

    # -- the end -----------------------------------------------------------------------------

    def _finish(self, exit_code: int | None, sig: int | None) -> None:
        self._stdin.put(None)
        terminal = self._terminal
        if terminal is None:
            terminal = self._synthetic(exit_code, sig)
            self._callback(self.on_event, terminal)
        self.outcome = RunOutcome(
            terminal=terminal,
            pid=self.pid,
            exit_code=exit_code,
            signal=sig,
            stderr_tail=self.stderr.text(),
            noise=self.noise.to_dict(),
            event_count=self._events + (1 if terminal is not self._terminal else 0),
            partial_text=self.partial_text(),
            cancelled_by=self.cancelled_by,
            duration=time.monotonic() - self._t0,
            killed=list(self._killed),
        )
        self._finished.set()

    def _synthetic(self, exit_code: int | None, sig: int | None) -> dict:
        how = f"signal {signal.Signals(sig).name}" if sig else f"exit code {exit_code}"
        if self._spawn_error is not None:
            code, message = "spawn_failed", self._spawn_error
        elif self._forced is not None:
            code, message = self._forced
        elif self._cancel_at is not None and self.pid is None:
            code, message = self._cancel_reason, f"cancelled by {self.cancelled_by} before the child was started"
        elif self._cancel_at is not None:
            code = self._cancel_reason
            message = f"stopped by the host ({self.cancelled_by}) before the child reported an end; it ended with {how}"
        else:
            code, message = "child_crash", f"the child ended with {how} without a terminal event"
        tail = self.stderr.text()
        return {
            "v": PROTOCOL_VERSION,
            "runId": self.run_id,
            "seq": self._last_seq + 1,
            "ts": now_ms(),
            "type": "run_error",
            "code": code,
            "message": message,
            "partialText": self.partial_text(),
            "exitCode": exit_code,
            "signal": signal.Signals(sig).name if sig else None,
            "stderrTail": tail[-4000:],
            "usage": self._last_usage,
            "counts": self._last_counts,
            "noise": self.noise.count,
            "synthetic": True,
        }


def describe_outcome(outcome: RunOutcome) -> str:
    """One line for logs."""
    t = outcome.terminal
    what = t.get("status") or t.get("code")
    return json.dumps({"runId": t.get("runId"), "type": t["type"], "what": what, "pid": outcome.pid, "exit": outcome.exit_code, "signal": outcome.signal})
