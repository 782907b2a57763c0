"""Staff roles for the authorization matrices (REST, socket, pages): who holds which
of Django's session permissions (the rule: runtime/sessions/access.py, docs/api.md "Access")."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

ROLE_PERMS = {
    "plain_staff": (),  # staff, no session permission: like any other user
    "view_staff": ("view_agentsession",),
    "change_staff": ("change_agentsession",),  # change implies view, as in the admin
    "delete_staff": ("view_agentsession", "delete_agentsession"),
}


def role_user(role: str):
    """A new user for ``role`` (one of ROLE_PERMS, or ``superuser``)."""
    model = get_user_model()
    if role == "superuser":
        return model.objects.create_user(role, password="pw", is_staff=True, is_superuser=True)
    user = model.objects.create_user(role, password="pw", is_staff=True)
    perms = Permission.objects.filter(content_type__app_label="sessions_tree", codename__in=ROLE_PERMS[role])
    user.user_permissions.set(perms)
    return user
