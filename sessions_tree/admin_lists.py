"""Console list pages that never load blobs.

A list page shows a handful of short columns per row; the rows behind it may
hold megabytes (a session's header and in-flight entry, an entry's payload, a
run's prompt and images, an agent's system prompt, a model's options). The list
query of a ``LightListAdmin`` defers every text, JSON and binary column of the
model and of the models it joins (``list_select_related``) except the ones the
list shows; the change page, which needs them, loads the row whole.
``LightRelatedFilter`` does the same for the choices of a foreign-key filter.

In the lowest app so that every app's admin may use it.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList

from audit.admin_actions import CheckedSelectionAdmin

BLOB_TYPES = frozenset({"TextField", "JSONField", "BinaryField"})


def blob_fields(model) -> list[str]:
    """The model's columns that may be large (text, JSON, binary)."""
    return [f.name for f in model._meta.concrete_fields if f.get_internal_type() in BLOB_TYPES]


class LightChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        return self.model_admin.list_queryset(queryset)


class LightListAdmin(CheckedSelectionAdmin):
    #: Blob columns the list does show (a short summary of them); the others are deferred.
    list_blobs_shown: tuple[str, ...] = ()

    def get_changelist(self, request, **kwargs):
        return LightChangeList

    def list_deferred(self) -> list[str]:
        shown = {*self.list_blobs_shown, *(name for name in self.list_display if isinstance(name, str))}
        deferred = [name for name in blob_fields(self.model) if name not in shown]
        related = self.list_select_related if isinstance(self.list_select_related, (list, tuple)) else ()
        for name in related:  # "agent" or a path, "agent__model"
            model = self.model
            for part in name.split("__"):
                model = model._meta.get_field(part).related_model
            deferred += [f"{name}__{field}" for field in blob_fields(model)]
        return deferred

    def list_queryset(self, queryset):
        """The list's rows without their blobs (override to add annotations the list shows)."""
        deferred = self.list_deferred()
        return queryset.defer(*deferred) if deferred else queryset


class LightRelatedFilter(admin.RelatedFieldListFilter):
    """A foreign-key filter whose choices are read without the related rows' blobs."""

    def field_choices(self, field, request, model_admin):
        model = field.remote_field.model
        ordering = self.field_admin_ordering(field, request, model_admin) or model._meta.ordering or ("pk",)
        rows = model._default_manager.complex_filter(field.get_limit_choices_to()).defer(*blob_fields(model))
        return [(row.pk, str(row)) for row in rows.order_by(*ordering)]
