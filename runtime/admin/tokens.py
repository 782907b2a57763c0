"""Integration tokens in the console: issue, rename, revoke, rotate (secrets shown once), through
``runtime.api.tokens``."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from audit.services import record
from runtime.api.tokens import (
    MAX_TOKEN_DAYS,
    api_token_create,
    api_token_revoke,
    api_token_rotate,
    may_issue_for,
)
from runtime.models import (
    ApiToken,
    TokenScope,
)
from sessions_tree.admin_lists import (
    LightListAdmin,
)

# --------------------------------------------------------------------------- integration tokens


class ApiTokenAddForm(forms.ModelForm):
    days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TOKEN_DAYS, help_text=_("Expire after this many days (empty: never).")
    )

    class Meta:
        model = ApiToken
        fields = ("user", "name", "scope")

    acting = None  # the person adding the token (set by ApiTokenAdmin.get_form)

    def clean_user(self):
        user = self.cleaned_data["user"]
        if not user.is_active:
            raise forms.ValidationError(_("this user is inactive"))
        if not may_issue_for(self.acting, user):
            raise forms.ValidationError(_("a token for another staff account acts as it: only a superuser may issue one"))
        return user


class TokenStateFilter(admin.SimpleListFilter):
    """Active, revoked or expired: the token's state as the list says it."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked"), ("expired", "expired")]

    def queryset(self, request, queryset):
        now = timezone.now()
        live = Q(revoked_at__isnull=True)
        if self.value() == "active":
            return queryset.filter(live & (Q(expires_at__isnull=True) | Q(expires_at__gt=now)))
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "expired":
            return queryset.filter(live & Q(expires_at__lte=now))
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(LightListAdmin):
    list_display = ("prefix_display", "user", "name", "scope", "state", "created_at", "expires_at", "last_used_at")
    list_filter = (TokenStateFilter, "scope")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    actions = ["revoke_tokens", "rotate_tokens"]
    readonly_fields = ("prefix_display", "user", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = type("ApiTokenAddFormFor", (ApiTokenAddForm,), {"acting": request.user})
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("user", "name", "scope", "days")
        return ("prefix_display", "user", "name", "scope", "state", "created_at", "created_by", "expires_at", "revoked_at", "last_used_at")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False  # a token is revoked (api_token_revoke), and kept for the record

    @admin.display(description=_("token"), ordering="prefix")
    def prefix_display(self, obj):
        return format_html("<code>{}…</code>", obj.prefix) if obj.prefix else "—"

    @admin.display(description=_("state"))
    def state(self, obj):
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at and obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def save_model(self, request, obj, form, change):
        if change:
            before = ApiToken.objects.filter(pk=obj.pk).values_list("name", flat=True).first()
            with transaction.atomic():
                obj.save(update_fields=["name"])  # the one field offered: never write back the rest (a revoke meanwhile)
                if before != obj.name:
                    record(actor=request.user, action="token.rename", target=obj, before={"name": before}, after={"name": obj.name})
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

    @admin.action(description=_("Rotate the selected tokens (new secrets shown once, the old ones stop working)"), permissions=["change"])
    def rotate_tokens(self, request, queryset):
        for token in queryset.select_related("user"):
            try:
                issued = api_token_rotate(token=token, actor=request.user)
            except (ValueError, PermissionDenied) as exc:
                self.message_user(request, _("Not rotated: %(token)s: %(exc)s") % {"token": token, "exc": exc}, messages.ERROR)
                continue
            self.message_user(
                request,
                format_html(
                    "Rotated {} → <code class=\"console-secret\">{}</code> for {} — copy it now, it will not be shown again; {}… no longer works.",
                    token.prefix, issued.secret, token.user, token.prefix,
                ),
                messages.WARNING,
            )  # fmt: skip

    @admin.action(description=_("Revoke the selected tokens"), permissions=["change"])
    def revoke_tokens(self, request, queryset):
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token, actor=request.user)
            count += 1
        self.message_user(request, _("revoked %(count)s token(s)") % {"count": count}, messages.SUCCESS)
