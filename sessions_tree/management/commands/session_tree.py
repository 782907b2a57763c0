from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from sessions_tree.errors import SessionTreeError
from sessions_tree.providers import provider_for_session
from sessions_tree.tree_text import render_tree


class Command(BaseCommand):
    help = "Print a session's tree: one line per entry, labels shown, the leaf and active path marked."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("--width", type=int, default=100, help="cut previews at this many characters")
        parser.add_argument("--database", default="default")

    def handle(self, *args, session_id: str, width: int, database: str, **options):
        try:
            provider = provider_for_session(session_id, using=database)
            header, entries, leaf = provider.session_source(session_id)
            path = [e["id"] for e in provider.get_active_path(session_id)]
        except SessionTreeError as exc:
            raise CommandError(str(exc)) from exc
        for line in render_tree(entries, leaf_id=leaf, active_path=path, width=width):
            self.stdout.write(line)
