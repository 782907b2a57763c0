"""Admin forms whose read-only fields can still be wrong.

A model's ``clean`` may find a problem with a field the form does not offer (read-only for
this person: a key variable, what a stdio server runs). Django's ``ModelForm`` then fails with
``ValueError`` (a server error): it can only attach an error to a field it has. This form says
such a problem at the top of the form, naming the field. In the lowest app so that every app's
admin may use it.
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


class ReadOnlyFieldErrorsForm(forms.ModelForm):
    def add_error(self, field, error):
        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            shown = {name: errors for name, errors in error.error_dict.items() if name in self.fields or name == NON_FIELD_ERRORS}
            hidden = [f"{name}: {message}" for name, errors in error.error_dict.items() if name not in shown for e in errors for message in e]
            if hidden:
                super().add_error(None, hidden)
            if shown:
                super().add_error(None, ValidationError(shown))
            return
        super().add_error(field, error)
