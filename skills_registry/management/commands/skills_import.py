"""``manage.py skills_import PATH_OR_ZIP [--scope ...] [--replace]``."""

from __future__ import annotations

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from skills_registry.discovery import SCOPES
from skills_registry.import_bundles import SkillImportError
from skills_registry.services import skill_import_folder, skill_import_zip


class Command(BaseCommand):
    help = "Import a skill from a ZIP archive or a local folder into the managed skills folder."

    def add_arguments(self, parser):
        parser.add_argument("source", type=Path, help="a .zip archive or a folder with SKILL.md at its top")
        parser.add_argument("--scope", choices=SCOPES, default="workspace")
        parser.add_argument("--replace", action="store_true", help="overwrite an earlier import of the same skill")
        parser.add_argument("--as-user", help="record this username as the importer")

    def handle(self, *args, source: Path, scope: str, replace: bool, as_user=None, **options):
        actor = None
        if as_user:
            try:
                actor = get_user_model().objects.get_by_natural_key(as_user)
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user {as_user!r}") from None
        if not os.path.lexists(source):
            raise CommandError(f"{source} does not exist")
        try:
            if source.is_dir():
                outcome = skill_import_folder(folder=source, scope=scope, actor=actor, replace=replace)
            else:
                outcome = skill_import_zip(archive=source, scope=scope, actor=actor, replace=replace)
        except SkillImportError as exc:
            raise CommandError(f"import refused: {exc}") from None
        skill = outcome.skill
        verb = "replaced" if outcome.replaced else "imported"
        self.stdout.write(
            f"{verb} {skill.name} ({skill.scope}, {skill.source}) at {outcome.target}: "
            f"status={skill.status} fingerprint={skill.short_fingerprint} revision={skill.revision}"
        )
        if skill.status != "active":
            for diag in skill.diagnostics:
                self.stdout.write(f"  {diag.get('severity')} {diag.get('code')}: {diag.get('message')}")
