from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from runtime.agents.specs import ModelUnavailable
from runtime.management.acting_user import acting_user, add_as_user_argument
from runtime.runs.summaries import SummaryFailed
from runtime.sessions.services import session_switch_leaf
from sessions_tree.errors import SessionTreeError


class Command(BaseCommand):
    help = "Move a session's leaf to ENTRY_ID (Pi's /tree rule), optionally summarizing the branch left."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("entry_id", help="target entry, or @root")
        parser.add_argument("--summarize", action="store_true", help="write a branch summary of the branch left")
        parser.add_argument("--instructions", help="extra focus for the summary")
        add_as_user_argument(parser)

    def handle(self, *args, session_id: str, entry_id: str, summarize: bool, instructions: str | None, as_user=None, **options):
        target = None if entry_id == "@root" else entry_id
        actor = acting_user(as_user)
        try:
            result = session_switch_leaf(
                session_id=session_id, entry_id=target, actor=actor, summarize=summarize, instructions=instructions
            )
        except (SessionTreeError, SummaryFailed, ModelUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"leaf: {result['leafId'] or '(root)'}")
        if result.get("summaryEntry"):
            self.stdout.write(f"branch summary: {result['summaryEntry']['id']}")
        if result.get("editorText"):
            self.stdout.write("text to edit:")
            self.stdout.write(result["editorText"])
