"""What the security tests share besides their fixtures: the planted secrets, permissions by
name, a logged-in client."""

from __future__ import annotations

from django.contrib.auth.models import Permission
from django.test import Client

SECRET = "canary-secret-key-7f3a"  # what NETA_SECRET_KEY holds in the environment
DB_URL = "mysql://root:canary-db-pw-7f3a@127.0.0.1/x"
PROVIDER_KEY = "canary-anthropic-key-7f3a"  # the Anthropic key the model 'claude' sends
PLANTED = (SECRET, "canary-db-pw-7f3a", PROVIDER_KEY)


def perms(*names: str) -> list[Permission]:
    """Permissions by ``app.codename``; ``app.model:*`` is the model's add/change/delete/view."""
    found = []
    for name in names:
        app, codename = name.split(".", 1)
        if codename.endswith(":*"):
            model = codename[:-2]
            found += list(Permission.objects.filter(content_type__app_label=app, codename__in=[f"{a}_{model}" for a in ("add", "change", "delete", "view")]))
        else:
            found.append(Permission.objects.get(content_type__app_label=app, codename=codename))
    return found


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client
