"""Bring the chat page's catalogs up to date with the phrases its modules mark
(neta/chat_catalog.py), or with ``--check`` only say what is wrong."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from neta.chat_catalog import catalog_path, catalog_problems, update_catalog


class Command(BaseCommand):
    help = "Update the chat page's translation catalogs (locale/*/LC_MESSAGES/chat.json) from static/chat."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="change nothing; fail when a catalog is not complete")

    def handle(self, *args, check=False, **options):
        languages = [code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE]
        failed = False
        for language in languages:
            if check:
                problems = catalog_problems(language)
                for problem in problems:
                    self.stderr.write(f"{language}: {problem}")
                failed = failed or bool(problems)
            else:
                added, removed = update_catalog(language)
                self.stdout.write(f"{catalog_path(language)}: {added} added (to translate), {removed} removed")
        if failed:
            raise CommandError("the chat page's catalogs are not complete")
