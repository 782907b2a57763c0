"""Sockets whose rights changed: signals that close them or make them check their rights again."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

from runtime.api.tokens import token_problem
from runtime.models import ApiToken
from runtime.realtime.publisher import recheck_users, withdraw_token, withdraw_user


def _user_saved(sender, instance, update_fields=None, created=False, **kwargs) -> None:
    if not instance.is_active:
        withdraw_user(instance.pk)
    elif not created and not (update_fields and set(update_fields) <= {"last_login", "password"}):
        recheck_users([instance.pk])  # staff or superuser may have changed


def _permissions_changed(sender, instance, action, model, pk_set, **kwargs) -> None:
    """``m2m_changed`` of users' permissions or groups, or of a group's permissions,
    from either side. A clear is handled before it happens (``pre_clear``), while the
    rows still say whom it concerns; the recheck itself goes out after commit."""
    if action not in ("post_add", "post_remove", "pre_clear"):
        return
    user_model = get_user_model()
    clear = action == "pre_clear"
    if isinstance(instance, user_model):
        users = [instance.pk]
    elif model is user_model and not clear:  # permission.user_set.add(user), group.user_set.remove(user)
        users = list(pk_set or ())
    elif isinstance(instance, Group):  # its permissions changed, or group.user_set.clear()
        users = list(instance.user_set.values_list("pk", flat=True))
    elif isinstance(instance, Permission) and model is user_model:  # permission.user_set.clear()
        users = list(instance.user_set.values_list("pk", flat=True))
    elif isinstance(instance, Permission):  # permission.group_set.add/remove/clear(group)
        groups = pk_set if not clear else set(instance.group_set.values_list("pk", flat=True))
        users = list(user_model.objects.filter(groups__in=groups or ()).values_list("pk", flat=True).distinct())
    else:
        return
    recheck_users(users)


def _group_deleting(sender, instance, **kwargs) -> None:
    """A group is deleted (the console's *Groups* page): its members' rights change,
    and the cascade sends no ``m2m_changed``."""
    recheck_users(list(instance.user_set.values_list("pk", flat=True)))


def _user_deleted(sender, instance, **kwargs) -> None:
    withdraw_user(instance.pk, "user deleted")


def _token_saved(sender, instance, **kwargs) -> None:
    problem = token_problem(instance)
    if problem is not None:
        withdraw_token(instance.pk, problem)


def _token_deleted(sender, instance, **kwargs) -> None:
    withdraw_token(instance.pk, "token deleted")


def install() -> None:
    """Register the signals that close sockets whose rights went (``RuntimeConfig.ready``):
    any save that leaves a user inactive (the admin's user page included), deleting a user,
    and saving (a revocation included) or deleting a token that no longer works. Other saves
    of a user and changes to user or group permissions, from either side, make the user's
    sockets check their rights again at once."""
    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="neta.realtime.user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="neta.realtime.user_deleted")
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid="neta.realtime.token_saved")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="neta.realtime.token_deleted")
    through = [user_model.user_permissions.through, user_model.groups.through, Group.permissions.through]
    for index, model in enumerate(through):
        m2m_changed.connect(_permissions_changed, sender=model, dispatch_uid=f"neta.realtime.permissions_changed.{index}")
    pre_delete.connect(_group_deleting, sender=Group, dispatch_uid="neta.realtime.group_deleting")
