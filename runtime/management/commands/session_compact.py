from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from runtime.agents.specs import ModelUnavailable
from runtime.management.acting_user import acting_user, add_as_user_argument
from runtime.runs.summaries import NothingToCompact, SummaryFailed
from runtime.sessions.services import session_compact
from sessions_tree.errors import SessionTreeError


class Command(BaseCommand):
    help = "Compact a session at its leaf with the agent's model (Pi's /compact)."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("--instructions", help="extra focus for the summary")
        add_as_user_argument(parser)

    def handle(self, *args, session_id: str, instructions: str | None, as_user: str | None = None, **options):
        actor = acting_user(as_user)
        try:
            entry = session_compact(session_id=session_id, actor=actor, instructions=instructions)
        except (SessionTreeError, NothingToCompact, SummaryFailed, ModelUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"compaction {entry['id']}: kept from {entry['firstKeptEntryId']}, {entry['tokensBefore']} tokens before"
        )
