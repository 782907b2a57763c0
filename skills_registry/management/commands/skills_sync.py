"""``manage.py skills_sync``: discover skills and record them (idempotent)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from skills_registry.diagnostics import VALIDATION_MODES
from skills_registry.services import skills_sync


class Command(BaseCommand):
    help = "Discover skills in the project, workspace and user roots and record them in the registry."

    def add_arguments(self, parser):
        parser.add_argument("--cwd", type=Path, help="project folder (default: NETA_SKILLS_PROJECT_DIR or the cwd)")
        parser.add_argument("--mode", choices=VALIDATION_MODES, help="validation mode (default: NETA_SKILLS_VALIDATION)")
        parser.add_argument("--quiet-diagnostics", action="store_true", help="print only the counts")

    def handle(self, *args, cwd=None, mode=None, quiet_diagnostics=False, **options):
        if cwd is not None and not cwd.is_dir():
            raise CommandError(f"--cwd {cwd} is not a folder")
        report = skills_sync(cwd=cwd, mode=mode)
        if not quiet_diagnostics:
            for name in report.added:
                self.stdout.write(f"added    {name}")
            for name in report.changed:
                self.stdout.write(f"changed  {name}")
            for name in report.removed:
                self.stdout.write(f"removed  {name}")
            for diag in report.diagnostics:
                self.stdout.write(f"{diag.severity:<8} {diag.code}: {diag.path}: {diag.message}")
        self.stdout.write(report.summary())
