"""Admin actions posted with row ids that are not ids of the list's model.

Django's admin filters the posted ``_selected_action`` values straight into the action's
queryset, and a value its primary key cannot take ("abc" for a number) raises there: a server
error. Every console list (``LightListAdmin``, the audited user and group pages) answers such a
post with a message instead, and runs nothing. In the lowest app so that every app's admin may
use it.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.utils.translation import gettext_lazy as _


class CheckedSelectionAdmin(admin.ModelAdmin):
    def response_action(self, request, queryset):
        key = self.model._meta.pk
        try:
            for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
                key.to_python(value)
        except ValidationError:
            self.message_user(request, _("The selection holds values that are not rows of this list: nothing was done."), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)
