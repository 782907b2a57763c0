"""Integration tokens in the staff console: create (shown once), revoke, audit."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from runtime.models import ApiToken, TokenScope
from runtime.tokens import MAX_TOKEN_DAYS, api_token_create, api_token_revoke


class ApiTokenAddForm(forms.ModelForm):
    days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TOKEN_DAYS, help_text="Expire after this many days (empty: never)."
    )

    class Meta:
        model = ApiToken
        fields = ("user", "name", "scope")

    def clean_user(self):
        user = self.cleaned_data["user"]
        if not user.is_active:
            raise forms.ValidationError("this user is inactive")
        return user


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix_display", "user", "name", "scope", "state", "created_at", "expires_at", "last_used_at")
    list_filter = ("scope", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    actions = ["revoke_tokens"]
    readonly_fields = ("prefix_display", "user", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name", "scope", "days")
        return ("prefix_display", "user", "name", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj):
        return format_html("<code>{}…</code>", obj.prefix) if obj.prefix else "—"

    @admin.display(description="state")
    def state(self, obj):
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at and obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = api_token_create(
            user=form.cleaned_data["user"],
            read_only=form.cleaned_data["scope"] == TokenScope.READ_ONLY,
            days=form.cleaned_data.get("days"),
            name=form.cleaned_data.get("name") or "",
            created_by=request.user,
        )
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(issued.token, field.attname))
        obj._state.adding = False
        self.message_user(
            request,
            format_html(
                "Token for {}: <code>{}</code> — copy it now, it is stored only as a digest and will not be shown again.",
                obj.user,
                issued.secret,
            ),
            messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke_tokens(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token)
            count += 1
        self.message_user(request, f"revoked {count} token(s)", messages.SUCCESS)
