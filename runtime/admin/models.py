"""Models in the console: capabilities, prices, whether the key variable is set (never its value), options
checked on save, *Test connection*, and who may direct a key (docs/security.md)."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _

from audit.admin import AuditedModelAdmin
from audit.admin_forms import ReadOnlyFieldErrorsForm
from runtime.agents.connection import model_test_connection
from runtime.agents.services import (
    MODEL_CREATABLE,
    MODEL_EDITABLE,
    may_direct_keys,
    model_config_create,
    model_config_update,
    model_write_problem,
)
from runtime.llm.options import known_options
from runtime.models import (
    CREDENTIAL_FIELDS,
    ModelConfig,
)
from sessions_tree.admin_lists import (
    LightListAdmin,
)


class ModelConfigForm(ReadOnlyFieldErrorsForm):
    """The model form; a problem with a field this person may not edit (a key variable shown
    read-only) is said at the top of the form, and the credentials rule of the services
    (``model_write_problem``: who may direct a key, where) is a form error, not a failed save."""

    acting = None  # the person saving (set by ModelConfigAdmin.get_form)

    def _post_clean(self):
        super()._post_clean()
        if self.acting is not None and not self.errors:
            try:
                model_write_problem(self.acting, self.instance, set(self.changed_data))
            except ValidationError as exc:
                self.add_error(None, exc)


@admin.register(ModelConfig)
class ModelConfigAdmin(AuditedModelAdmin, LightListAdmin):
    """Models: capabilities, prices, whether the key variable is set (never its value), the agents
    using each, options checked on save (``ModelConfig.clean``), and *Test connection*. Saves are
    audited (``AuditedModelAdmin``)."""

    audit_action = "model"
    form = ModelConfigForm
    list_display = (
        "name", "display_name", "provider_kind", "model_id", "capabilities", "context_window", "prices_per_m",
        "key_status", "agent_count", "enabled",
    )
    list_filter = ("provider_kind", "enabled")
    search_fields = ("name", "model_id", "display_name")
    readonly_fields = ("key_status", "agents_using", "known_options", "created_at", "updated_at")
    change_form_template = "admin/runtime/modelconfig/change_form.html"
    fieldsets = (
        (None, {"fields": ("name", "display_name", "enabled", "agents_using")}),
        ("Provider and key", {"fields": ("provider_kind", "provider_name", "model_id", "base_url", "api_key_env", "key_status")}),
        ("Capabilities and limits", {"fields": ("supports_tools", "supports_thinking", "supports_images", "context_window", "max_output_tokens")}),
        ("Prices (USD per million tokens)", {"fields": ("price_input", "price_output", "price_cache_read", "price_cache_write")}),
        ("Options", {"fields": ("options", "known_options")}),
        ("Timestamps", {"classes": ("collapse",), "fields": ("created_at", "updated_at")}),
    )

    def get_queryset(self, request):
        # Annotated before the list orders it: the agents column sorts by the count (?o=…).
        return super().get_queryset(request).annotate(agent_total=Count("agents"))

    @admin.display(description=_("capabilities"))
    def capabilities(self, obj):
        caps = [name for name, on in (("tools", obj.supports_tools), ("thinking", obj.supports_thinking), ("images", obj.supports_images)) if on]
        return ", ".join(caps) or "text only"

    @admin.display(description=_("$ per M in / out"))
    def prices_per_m(self, obj):
        return f"{obj.price_input:g} / {obj.price_output:g}"

    @admin.display(description=_("agents"), ordering="agent_total")
    def agent_count(self, obj):
        return getattr(obj, "agent_total", None)

    @admin.display(description=_("API key"))
    def key_status(self, obj):
        if obj.provider_kind == "scripted":
            return "not needed"
        if not obj.api_key_env:
            return "no variable named"
        # Only whether it is set: the value is never shown.
        return f"{obj.api_key_env} is set" if obj.key_is_set else f"{obj.api_key_env} is NOT set"

    @admin.display(description=_("agents using it"))
    def agents_using(self, obj):
        if obj.pk is None:
            return "—"
        agents = list(obj.agents.only("pk", "name", "enabled").order_by("name"))
        if not agents:
            return "none"
        return format_html_join(
            ", ", '<a href="{}">{}</a>{}',
            ((reverse("admin:runtime_agent_change", args=[a.pk]), a.name, "" if a.enabled else " (disabled)") for a in agents),
        )

    @admin.display(description=_("options this provider reads"))
    def known_options(self, obj):
        return ", ".join(known_options(obj.provider_kind)) if obj.provider_kind else "—"

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type(form.__name__, (form,), {"acting": request.user})

    def get_readonly_fields(self, request, obj=None):
        fields = list(self.readonly_fields)
        if obj is not None:
            fields.append("name")  # runs name the model they used (``AgentRun.model_name``): a rename would orphan them
        if not may_direct_keys(request.user):
            # Where a key goes is the "Can direct API keys" permission's (docs/security.md): without it a
            # new model has no key or endpoint, and a saved one keeps its provider, endpoint and key.
            fields += ["base_url", "api_key_env"] if obj is None else list(CREDENTIAL_FIELDS)
        return fields

    def save_model(self, request, obj, form, change):
        """Through the services the API uses: ``model_config_create`` for a new model,
        ``model_config_update`` for the fields the form changed — validated, the credentials rule
        applied, saved and audited in one transaction."""
        if not change:
            fields = {f.name: getattr(obj, f.name) for f in ModelConfig._meta.concrete_fields if f.name in MODEL_CREATABLE}
            saved = model_config_create(actor=request.user, fields=fields)
            obj.pk = saved.pk
            obj.refresh_from_db()
            return
        fields = [name for name in form.changed_data if name in MODEL_EDITABLE]
        model_config_update(model_id=obj.pk, actor=request.user, changes={name: getattr(obj, name) for name in fields})
        obj.refresh_from_db()

    def get_urls(self):
        test = path("<path:object_id>/test/", self.admin_site.admin_view(self.test_connection_view), name="runtime_modelconfig_test")
        return [test, *super().get_urls()]

    def test_connection_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        model = self.get_object(request, object_id)
        if model is None:
            raise Http404(_("no such model"))
        if not self.has_change_permission(request, model):
            raise PermissionDenied  # it calls the provider (and may cost a few tokens): for those who may change models
        result = model_test_connection(model=model)
        request.session["console_model_test"] = {"model": model.pk, **result.to_dict()}
        return HttpResponseRedirect(reverse("admin:runtime_modelconfig_change", args=[model.pk]))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        tested = request.session.get("console_model_test")
        if tested and object_id and str(tested.get("model")) == str(object_id):
            extra["connection_test"] = request.session.pop("console_model_test")
        return super().changeform_view(request, object_id, form_url, extra)
