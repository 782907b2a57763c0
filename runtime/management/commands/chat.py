"""``chat``: one turn from the terminal, streamed as it happens."""

from __future__ import annotations

import json
import signal
import sys
import threading

from django.core.management.base import BaseCommand, CommandError
from django.utils import translation
from django.utils.translation import gettext as _

from runtime.agents.selectors import default_agent
from runtime.agents.workspaces import workspace_for
from runtime.errors import RuntimeInputError
from runtime.management.acting_user import acting_user, add_as_user_argument
from runtime.management.terminal_language import terminal_language
from runtime.models import Agent, RunStatus
from runtime.runs.prompts import session_prompt
from runtime.runs.questions import answer_question
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.errors import SessionTreeError
from sessions_tree.models import AgentSession

DIM, RESET, BOLD = "\x1b[2m", "\x1b[0m", "\x1b[1m"


class TerminalSink:
    """Text live, thinking dimmed, tool calls and results as short lines."""

    def __init__(self, out, *, color: bool):
        self._out = out
        self.color = color
        self.mode = None  # "text" | "thinking"

    def write(self, text: str) -> None:
        # Django's OutputWrapper adds a newline unless told otherwise.
        self._out.write(text, ending="")

    def _style(self, code: str) -> str:
        return code if self.color else ""

    def _switch(self, mode):
        if self.mode != mode:
            if self.mode is not None:
                self.write(self._style(RESET) + "\n")
            if mode == "thinking":
                self.write(self._style(DIM))
            self.mode = mode

    def emit(self, session_id: str, event: dict) -> None:
        kind = event["type"]
        if kind == "assistant_stream_delta":
            self._switch(event.get("kind"))
            self.write(event.get("delta", ""))
        elif kind == "tool_call_completed":
            self._switch(None)
            call = event.get("toolCall") or {}
            args = json.dumps(call.get("arguments"), ensure_ascii=False)
            self.write(f"{self._style(BOLD)}→ {call.get('name')}{self._style(RESET)} {args[:200]}\n")
        elif kind == "tool_result_streamed" and event.get("final"):
            self._switch(None)
            text = (event.get("text") or "").strip().splitlines()
            first = text[0][:160] if text else "(no output)"
            status = "error" if event.get("isError") else "ok"
            extra = f" (+{len(text) - 1} lines)" if len(text) > 1 else ""
            self.write(f"← {status}: {first}{extra}\n")
        elif kind == "assistant_stream_end":
            self._switch(None)
        elif kind == "subagent_run_started":
            self._switch(None)
            self.write(f"  ⇢ subagent {event.get('taskIndex', 0) + 1} ({event.get('agent')}) started: pid {event.get('pid')}\n")
        elif kind == "subagent_event" and (event.get("event") or {}).get("type") == "tool_call":
            self._switch(None)
            self.write(f"  ⇢ subagent {event.get('taskIndex', 0) + 1} → {(event.get('event') or {}).get('name')}\n")
        elif kind == "subagent_run_completed":
            self._switch(None)
            code = f" ({event['errorCode']})" if event.get("errorCode") else ""
            self.write(f"  ⇠ subagent {event.get('taskIndex', 0) + 1} ({event.get('agent')}) {event.get('status')}{code}\n")
        self._out.flush()


class Command(BaseCommand):
    help = "Send one prompt to an agent and stream the answer to the terminal."

    def add_arguments(self, parser):
        parser.add_argument("text")
        parser.add_argument("--agent", help="agent name (default: the default agent)")
        parser.add_argument("--session", help="continue this session (default: a new one)")
        parser.add_argument("--from", dest="from_entry", help="continue from this entry (Pi's /tree rule)")
        parser.add_argument("--model", help="use this model for the turn")
        add_as_user_argument(parser)

    def handle(self, *args, **options):
        # Messages in the terminal's language (LANG=zh_CN.UTF-8: Simplified Chinese).
        with translation.override(terminal_language()):
            return self._handle(*args, **options)

    def _handle(self, *args, text, agent=None, session=None, from_entry=None, model=None, as_user=None, **options):
        no_color = options.get("no_color", False)
        actor = acting_user(as_user)
        try:
            chosen = Agent.objects.select_related("model").get(name=agent, enabled=True) if agent else default_agent()
        except Agent.DoesNotExist:
            raise CommandError(_("no enabled agent named %(name)r") % {"name": agent}) from None
        except RuntimeInputError as exc:
            raise CommandError(str(exc)) from exc
        try:
            if session:
                if not AgentSession.objects.filter(session_id=session).exists():
                    raise CommandError(_("no session %(session_id)r") % {"session_id": session})
                session_id = session
            else:
                session_id = session_start(agent=chosen, user=actor).session_id
            outcome = session_prompt(
                session_id=session_id, text=text, actor=actor, from_entry_id=from_entry, model_name=model, dispatch=False
            )
        except (RuntimeInputError, SessionTreeError) as exc:
            raise CommandError(str(exc)) from exc
        if outcome.queued_as:
            raise CommandError(_("session %(session)s has a run in progress; queued as %(mode)s") % {"session": session_id, "mode": outcome.queued_as})
        color = not no_color and sys.stdout.isatty()
        sink = TerminalSink(self.stdout, color=color)
        cancel = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
        try:
            run = execute_run(outcome.run.run_id, sink=sink, cancel=cancel)
            # The model asked (ask_user): answer here when there is someone to ask, resume.
            while run is not None and run.status == RunStatus.WAITING and sys.stdin.isatty():
                answer = self._ask(run.question)
                try:
                    answer_question(session_id=session_id, tool_call_id=run.question["toolCallId"], answer=answer, actor=actor, start=False)
                except RuntimeInputError as exc:
                    self.stderr.write(str(exc))
                    continue
                run = execute_run(run.run_id, sink=sink, cancel=cancel)
        finally:
            signal.signal(signal.SIGINT, previous)
        run.refresh_from_db()
        workspace = workspace_for(chosen, AgentSession.objects.get(session_id=session_id), create=False)
        self.stdout.write("")
        self.stdout.write(
            _("%(status)s · %(input)s in / %(output)s out tokens · $%(cost).6f · session %(session)s · workspace %(cwd)s (%(mode)s)")
            % {"status": run.status, "input": run.input_tokens, "output": run.output_tokens, "cost": run.cost, "session": session_id, "cwd": workspace.cwd, "mode": workspace.mode}
        )
        if run.status == RunStatus.WAITING:
            raise CommandError(
                _("the run waits for an answer to: %(question)r (options: %(options)s); answer with POST /api/sessions/%(session)s/answer/ {toolCallId: %(call)r, answer}")
                % {"question": run.question.get("question"), "options": run.question.get("options") or _("free text"), "session": session_id, "call": run.question.get("toolCallId")}
            )
        if run.status != RunStatus.COMPLETED:
            raise CommandError(run.error or run.status)

    def _ask(self, question: dict):
        """The question on the terminal; a number picks an option (several, comma-separated, with multi_select)."""
        options = question.get("options") or []
        self.stdout.write(f"\n? {question.get('question')}")
        for index, option in enumerate(options, 1):
            self.stdout.write(f"  {index}. {option}")
        reply = input("> ").strip()
        picks = [p.strip() for p in reply.split(",")] if question.get("multiSelect") else [reply]
        chosen = [options[int(p) - 1] if p.isdigit() and 0 < int(p) <= len(options) else p for p in picks]
        return chosen if question.get("multiSelect") else chosen[0]
