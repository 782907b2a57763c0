from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_tree.errors import SessionTreeError
from sessions_tree.pi_files import export_lines, export_session


class Command(BaseCommand):
    help = "Export a session as a Pi v3 JSONL file (to stdout, or -o PATH)."

    def add_arguments(self, parser):
        parser.add_argument("session_id")
        parser.add_argument("-o", "--output", type=Path)
        parser.add_argument("--database", default="default")

    def handle(self, *args, session_id: str, output: Path | None, database: str, **options):
        try:
            if output is not None:
                export_session(session_id, output, using=database)
                self.stderr.write(f"wrote {output}")
                return
            out = sys.stdout.buffer
            for line in export_lines(session_id, using=database):
                out.write(line.encode("utf-8"))
            out.flush()
        except SessionTreeError as exc:
            raise CommandError(str(exc)) from exc
