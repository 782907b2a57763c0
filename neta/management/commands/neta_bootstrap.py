"""Make a fresh installation usable: a staff account a newcomer can log in with.

Never a fixed password: the first run creates ``admin`` with a random password,
prints it once and keeps it in ``var/admin-password`` (mode 0600) so the README
can tell a newcomer where to find it. Later runs change nothing.
"""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Make a fresh installation usable: demo model and default agent, a skills sync, and the first "
        "staff account (random password in var/admin-password) if none exists."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        from runtime.agents.bootstrap import runtime_bootstrap  # the command module loads with every manage.py call: its imports at use
        from skills_registry.services import skills_startup_sync  # the command module loads with every manage.py call: its imports at use

        for item in runtime_bootstrap():
            self.stdout.write(f"created {item}")
        report = skills_startup_sync()
        if report is not None:
            self.stdout.write(f"skills: {report.summary()}")
        self._ensure_staff(username)

    def _ensure_staff(self, username: str) -> None:
        User = get_user_model()
        password_file = settings.VAR_DIR / "admin-password"
        if User.objects.filter(is_staff=True, is_active=True).exists():
            hint = f" (password in {password_file})" if password_file.exists() else ""
            self.stdout.write(f"staff account exists{hint}")
            return
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = user.is_active = True
        user.set_password(password)
        user.save()
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"{username}\n{password}\n")
        self.stdout.write(self.style.SUCCESS(
            f"created staff account {username!r} with password {password} (kept in {password_file})"
        ))
