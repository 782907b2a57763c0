"""Who may read, write and delete a session: the one owner-or-staff rule (API, socket, pages)."""

from __future__ import annotations

from dataclasses import dataclass

from sessions_tree.models import AgentSession

VIEW_PERM = "sessions_tree.view_agentsession"


CHANGE_PERM = "sessions_tree.change_agentsession"


DELETE_PERM = "sessions_tree.delete_agentsession"


@dataclass(frozen=True)
class Access:
    read: bool = False
    write: bool = False
    delete: bool = False

    def allows(self, need: str) -> bool:
        return getattr(self, need)


NO_ACCESS = Access()


FULL_ACCESS = Access(read=True, write=True, delete=True)


def _active(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def reads_all_sessions(user) -> bool:
    """Whether ``user`` may read every user's sessions."""
    if not _active(user):
        return False
    return user.is_superuser or (user.is_staff and (user.has_perm(VIEW_PERM) or user.has_perm(CHANGE_PERM)))


def access_to_others_sessions(user) -> Access:
    """What ``user`` may do with sessions owned by someone else."""
    if not _active(user):
        return NO_ACCESS
    if user.is_superuser:
        return FULL_ACCESS
    if not user.is_staff:
        return NO_ACCESS
    change = user.has_perm(CHANGE_PERM)
    read = change or user.has_perm(VIEW_PERM)
    return Access(read=read, write=read and change, delete=read and user.has_perm(DELETE_PERM))


def session_access(user, meta, *, token=None) -> Access:
    """What ``user`` (authenticated by ``token``, if any) may do with the session ``meta``.

    ``meta`` is an ``AgentSession`` (only ``user_id`` is read) or None (no such
    session: no access).
    """
    if meta is None or not _active(user):
        return NO_ACCESS
    access = FULL_ACCESS if meta.user_id == user.pk else access_to_others_sessions(user)
    if token is not None and getattr(token, "read_only", False):
        access = Access(read=access.read)
    return access


def visible_sessions(user):
    """The sessions ``user`` may read (a queryset)."""
    qs = AgentSession.objects.all()
    if not _active(user):
        return qs.none()
    return qs if reads_all_sessions(user) else qs.filter(user=user)
