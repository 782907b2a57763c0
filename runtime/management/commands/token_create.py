"""``python manage.py token_create USERNAME [--read-only] [--days N] [--name TEXT]``.

Prints the new integration token once (it is stored only as a digest); the
details go to stderr so that ``TOKEN=$(manage.py token_create alice)`` works.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runtime.api.tokens import MAX_TOKEN_DAYS, api_token_create


class Command(BaseCommand):
    help = "Create an integration token for USERNAME and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--read-only", action="store_true", help="Only GET/HEAD/OPTIONS and socket subscriptions.")
        parser.add_argument("--days", type=int, default=None, help=f"Expire after N days (1..{MAX_TOKEN_DAYS}); default: never.")
        parser.add_argument("--name", default="", help="What the token is for (shown in the console).")

    def handle(self, *args, username, read_only, days, name, **options):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        try:
            issued = api_token_create(user=user, read_only=read_only, days=days, name=name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        token = issued.token
        expiry = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        self.stderr.write(
            f"token {token.prefix}… for {user} ({token.get_scope_display()}, {expiry}); "
            "it is shown only now, store it safely:"
        )
        self.stdout.write(issued.secret)
