"""The audit log's page (view only, for everyone) and the mixin that audits a model admin's saves."""

from __future__ import annotations

import json

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import FieldDoesNotExist
from django.db import transaction
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from audit.admin_actions import CheckedSelectionAdmin
from audit.models import AuditEntry
from audit.services import changed_fields, record


def _pre(value) -> str:
    if value is None:
        return "—"
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Browsable and filterable; nobody adds, edits or deletes a row (superusers included)."""

    list_display = ("at", "actor_name", "action", "target_type", "target_link", "via", "request_id")
    list_filter = ("via", "action", "target_type", ("at", admin.DateFieldListFilter))
    search_fields = ("actor_name", "action", "target_id", "target_repr", "request_id")
    date_hierarchy = "at"
    list_per_page = 50
    show_full_result_count = False
    fields = ("at", "actor", "actor_name", "action", "target_type", "target_id", "target_repr", "via", "request_id", "changes", "before_json", "after_json")
    readonly_fields = fields
    actions = None

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("before", "after")  # the list never loads the values
        return qs

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("target"), ordering="target_id")
    def target_link(self, obj):
        label = obj.target_repr or obj.target_id
        return label if label == obj.target_id else format_html("{} <code>{}</code>", label, obj.target_id)

    @admin.display(description=_("what changed"))
    def changes(self, obj):
        before, after = obj.before or {}, obj.after or {}
        if not isinstance(before, dict) or not isinstance(after, dict):
            return "—"
        old, new = changed_fields(before, after)
        if not old and not new:
            return "—"
        rows = [(k, json.dumps(old.get(k), ensure_ascii=False), json.dumps(new.get(k), ensure_ascii=False)) for k in sorted(new)]
        return format_html(
            "<table><tr><th>field</th><th>before</th><th>after</th></tr>{}</table>",
            format_html_join("", "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>", rows),
        )

    @admin.display(description=_("before"))
    def before_json(self, obj):
        return _pre(obj.before)

    @admin.display(description=_("after"))
    def after_json(self, obj):
        return _pre(obj.after)


def _field_values(obj, names, exclude=()) -> dict:
    values = {}
    for name in names:
        if name in exclude:
            continue
        try:
            field = obj._meta.get_field(name)
        except FieldDoesNotExist:  # a form-only field
            continue
        if field.concrete:
            values[name] = field.value_from_object(obj)
    return values


def _members(obj, name: str) -> list[str]:
    return sorted(str(member) for member in getattr(obj, name).all())


class AuditedModelAdmin(CheckedSelectionAdmin):
    """Records the admin's own saves and deletes of a configuration row (an agent, a model…):
    the changed fields before and after, in the save's transaction. ``audit_action`` names the
    thing (``agent`` → ``agent.create`` / ``agent.change`` / ``agent.delete``)."""

    audit_action = ""
    audit_exclude: tuple[str, ...] = ()  # never recorded (a password hash)

    def _audit_name(self) -> str:
        return self.audit_action or self.model._meta.model_name

    def save_model(self, request, obj, form, change):
        names = list(form.changed_data) if change else [f.name for f in obj._meta.concrete_fields if f.name != "id"]
        before = {}
        if change and obj.pk is not None:
            stored = type(obj)._default_manager.filter(pk=obj.pk).first()
            before = _field_values(stored, names, self.audit_exclude) if stored is not None else {}
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            after = _field_values(obj, names, self.audit_exclude)
            old, new = changed_fields(before, after) if change else ({}, after)
            if not change or new:
                record(
                    actor=request.user, action=f"{self._audit_name()}.{'change' if change else 'create'}",
                    target=obj, before=old or None, after=new, via="console",
                )  # fmt: skip

    def save_related(self, request, form, formsets, change):
        """Many-to-many fields the form changed (a user's groups, a group's permissions): one
        more row with their members before and after, in the same transaction."""
        names = [f.name for f in form.instance._meta.many_to_many if f.name in form.changed_data and f.name not in self.audit_exclude]
        before = {name: _members(form.instance, name) for name in names} if change else {}
        with transaction.atomic():
            super().save_related(request, form, formsets, change)
            after = {name: _members(form.instance, name) for name in names}
            old, new = changed_fields(before, after) if change else ({}, after)
            if new:
                record(actor=request.user, action=f"{self._audit_name()}.change_members", target=form.instance, before=old or None, after=new, via="console")

    def delete_model(self, request, obj):
        before = _field_values(obj, [f.name for f in obj._meta.concrete_fields], self.audit_exclude)
        ident, label = obj.pk, str(obj)
        with transaction.atomic():
            super().delete_model(request, obj)
            record(actor=request.user, action=f"{self._audit_name()}.delete", target=(obj._meta.label_lower, ident, label), before=before, via="console")

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


# Users and groups are staff writes too (who may use an agent follows them): Django's own
# pages, audited.
admin.site.unregister(get_user_model())
admin.site.unregister(Group)


#: What makes an account more than it is: granted only by a superuser (docs/security.md). A
#: person with the user permissions alone could otherwise make themselves a superuser.
RIGHTS_FIELDS = ("is_superuser", "groups", "user_permissions")


@admin.register(get_user_model())
class AuditedUserAdmin(AuditedModelAdmin, UserAdmin):
    """Accounts, audited. Rights — superuser status, groups, permissions — and superusers'
    own accounts (their password included) are changed by superusers only."""

    audit_action = "user"
    audit_exclude = ("password", "last_login")

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += [name for name in RIGHTS_FIELDS if name not in fields]
        return fields

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

    def user_change_password(self, request, id, form_url=""):
        with transaction.atomic():
            response = super().user_change_password(request, id, form_url)
            if request.method == "POST" and response.status_code == 302:  # saved (the hash is never recorded)
                user = self.get_object(request, unquote(id))
                record(actor=request.user, action="user.set_password", target=user, via="console")
        return response


@admin.register(Group)
class AuditedGroupAdmin(AuditedModelAdmin, GroupAdmin):
    """Groups carry permissions: adding or changing one grants rights, a superuser's act."""

    audit_action = "group"

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser
