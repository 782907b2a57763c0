from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions_tree.errors import SessionTreeError
from sessions_tree.pi_files import import_session_file
from sessions_tree.providers import SESSION_PROVIDER_KINDS


class Command(BaseCommand):
    help = "Import Pi session files. Prints <session_id>\\t<entry_count>\\t<path> per imported file."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--provider", choices=SESSION_PROVIDER_KINDS, default="file")
        parser.add_argument("--database", default="default", help="database alias (default: default)")

    def handle(self, *args, paths: list[Path], provider: str, database: str, **options):
        failed = 0
        for path in paths:
            try:
                meta = import_session_file(path, provider_kind=provider, using=database)
            except SessionTreeError as exc:
                failed += 1
                self.stderr.write(f"session_import: {exc}")
                continue
            report = meta.diagnostics.get("import", {})
            changed = report.get("idChanged")
            if changed:
                self.stderr.write(f"session_import: {path}: id {changed['from']} is taken; imported as {changed['to']}")
            for what in ("skipped", "repaired"):
                if report.get(f"{what}LineCount"):
                    lines = ", ".join(str(d["line"]) for d in report[f"{what}Lines"])
                    self.stderr.write(f"session_import: {path}: {report[f'{what}LineCount']} line(s) {what}: {lines}")
            self.stdout.write(f"{meta.session_id}\t{meta.entry_count}\t{path}")
        if failed:
            raise CommandError(f"{failed} of {len(paths)} file(s) not imported", returncode=1)
