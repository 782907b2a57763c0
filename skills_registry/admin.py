"""Staff console for skills: the registry list, a detail view, actions, sync and import pages.

Rows come from discovery, so they cannot be added or deleted here; staff
change only the governance switches, through the services.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from sessions_tree.admin_lists import LightListAdmin
from skills_registry import services
from skills_registry.confinement import ConfinementError
from skills_registry.discovery import SCOPES
from skills_registry.import_bundles import SkillImportError
from skills_registry.models import SkillResource, SkillVersion
from skills_registry.selectors import skill_entry_text

_SKILL_MD_SHOWN = 64 * 1024


def _pretty_json(value) -> str:
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


class SkillVersionInline(admin.TabularInline):
    model = SkillVersion
    extra = 0
    can_delete = False
    fields = ("revision", "fingerprint", "version", "recorded_at")
    readonly_fields = fields
    ordering = ("-revision",)

    def has_add_permission(self, request, obj=None):
        return False


class SkillImportForm(forms.Form):
    scope = forms.ChoiceField(choices=[(s, s) for s in SCOPES], initial="workspace")
    archive = forms.FileField(required=False, help_text=_("A .zip with SKILL.md at its top or in one folder."))
    folder = forms.CharField(
        required=False,
        help_text=_("Or the absolute path of a skill folder on the server (superusers only); it is copied."),
    )
    replace = forms.BooleanField(required=False, help_text=_("Overwrite an earlier import of the same skill."))

    def clean(self):
        data = super().clean()
        if bool(data.get("archive")) == bool(data.get("folder")):
            raise forms.ValidationError(_("Give either a ZIP archive or a folder path."))
        return data


@admin.register(SkillResource)
class SkillResourceAdmin(LightListAdmin):
    change_list_template = "admin/skills_registry/skillresource/change_list.html"
    list_display = (
        "name",
        "console_page",
        "scope",
        "source",
        "status",
        "governance",
        "fingerprint_short",
        "version",
        "revision",
        "subagents",
        "diagnostics_summary",
    )
    list_filter = ("status", "scope", "source", "disabled", "allow_in_subagent", "requires_privilege")
    search_fields = ("name", "description")
    list_per_page = 100
    show_full_result_count = False
    inlines = (SkillVersionInline,)
    actions = (
        "sync_now",
        "disable",
        "enable",
        "allow_in_subagents",
        "deny_in_subagents",
        "mark_privileged",
        "unmark_privileged",
        "remove_imported",
    )
    fieldsets = (
        (None, {"fields": ("name", "description", "status", "disabled", "scope", "source", "version", "revision")}),
        ("Governance", {"fields": ("allow_in_subagent", "requires_privilege", "disable_model_invocation", "changed_by")}),
        ("Location", {"fields": ("entry_file", "base_dir", "source_info_view", "fingerprint")}),
        ("Problems", {"fields": ("diagnostics_view",)}),
        ("Contents", {"fields": ("skill_md", "file_list", "metadata_view")}),
        ("Timestamps", {"fields": ("first_seen_at", "last_seen_at", "updated_at")}),
    )

    list_blobs_shown = ("diagnostics",)  # summarized in the list (codes and severities)

    def get_readonly_fields(self, request, obj=None):
        return [f for group in self.fieldsets for f in group[1]["fields"]]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        # The governance switches change through the actions (services); a skill's page is a
        # view: saving it would write the row back behind the registry's sync.
        return obj is None and super().has_change_permission(request)

    # --- columns ---------------------------------------------------------------------

    @admin.display(description=_("page"))
    def console_page(self, obj):
        # The console's page of the skill: versions and diff, precedence, who can use it (neta/console/skills.py).
        return format_html('<a href="{}">details</a>', reverse("admin:console_skill", args=[obj.pk]))

    @admin.display(description=_("governance"), ordering="disabled")
    def governance(self, obj):
        # Said, not a red ✗ beside a skill that is on (the column once showed "disabled: no" so).
        return "disabled" if obj.disabled else "enabled"

    @admin.display(description=_("fingerprint"))
    def fingerprint_short(self, obj):
        return obj.short_fingerprint

    @admin.display(description=_("subagents"))
    def subagents(self, obj):
        if obj.requires_privilege:
            return "never (privileged)"
        return "allowed" if obj.allow_in_subagent else "denied"

    @admin.display(description=_("diagnostics"))
    def diagnostics_summary(self, obj):
        if not obj.diagnostics:
            return "—"
        return ", ".join(f"{d.get('code')} ({d.get('severity')})" for d in obj.diagnostics)

    # --- detail ------------------------------------------------------------------------

    @admin.display(description=_("SKILL.md"))
    def skill_md(self, obj):
        try:
            text = skill_entry_text(obj)
        except (ConfinementError, OSError) as exc:
            return format_html("<em>cannot be read: {}</em>", str(exc))
        shown = text[:_SKILL_MD_SHOWN]
        more = f"\n… ({len(text) - len(shown)} more characters)" if len(text) > len(shown) else ""
        return format_html("<pre style='white-space:pre-wrap;max-width:100ch'>{}{}</pre>", shown, more)

    @admin.display(description=_("files"))
    def file_list(self, obj):
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (
                (f.get("path"), f.get("kind"), f.get("size"), (f.get("sha256") or f.get("target") or "")[:16])
                for f in obj.files
            ),
        )
        note = ""
        if obj.file_count > len(obj.files):
            note = format_html("<p>{} of {} files shown.</p>", len(obj.files), obj.file_count)
        return format_html(
            "<table><tr><th>path</th><th>kind</th><th>bytes</th><th>sha256 / target</th></tr>{}</table>{}",
            rows,
            note,
        )

    @admin.display(description=_("diagnostics"))
    def diagnostics_view(self, obj):
        return _pretty_json(obj.diagnostics) if obj.diagnostics else "—"

    @admin.display(description=_("source info"))
    def source_info_view(self, obj):
        return _pretty_json(obj.source_info)

    @admin.display(description=_("other frontmatter fields"))
    def metadata_view(self, obj):
        return _pretty_json(obj.metadata) if obj.metadata else "—"

    # --- actions ------------------------------------------------------------------------

    def _report_sync(self, request, report):
        self.message_user(request, _("Skills synced: %(report_summary)s") % {"report_summary": report.summary()}, messages.SUCCESS)

    @admin.action(description=_("Sync now (discover all skills again)"), permissions=["change"])
    def sync_now(self, request, queryset):
        self._report_sync(request, services.skills_sync(actor=request.user))

    @admin.action(description=_("Disable selected skills"), permissions=["change"])
    def disable(self, request, queryset):
        n = services.skills_set_disabled(skills=queryset, disabled=True, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) disabled.") % {"n": n}, messages.SUCCESS)

    @admin.action(description=_("Enable selected skills"), permissions=["change"])
    def enable(self, request, queryset):
        n = services.skills_set_disabled(skills=queryset, disabled=False, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) enabled.") % {"n": n}, messages.SUCCESS)

    @admin.action(description=_("Allow in subagents"), permissions=["change"])
    def allow_in_subagents(self, request, queryset):
        n = services.skills_set_subagent_access(skills=queryset, allowed=True, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) allowed in subagents (privileged ones stay hidden).") % {"n": n})

    @admin.action(description=_("Deny in subagents"), permissions=["change"])
    def deny_in_subagents(self, request, queryset):
        n = services.skills_set_subagent_access(skills=queryset, allowed=False, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) denied in subagents.") % {"n": n})

    @admin.action(description=_("Mark as requiring privilege (never in subagents)"), permissions=["change"])
    def mark_privileged(self, request, queryset):
        n = services.skills_set_privilege(skills=queryset, requires_privilege=True, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) marked privileged.") % {"n": n})

    @admin.action(description=_("Unmark privileged"), permissions=["change"])
    def unmark_privileged(self, request, queryset):
        n = services.skills_set_privilege(skills=queryset, requires_privilege=False, actor=request.user)
        self.message_user(request, _("%(n)s skill(s) no longer privileged.") % {"n": n})

    @admin.action(description=_("Remove imported skills (delete their managed folder)"), permissions=["change"])
    def remove_imported(self, request, queryset):
        removed = 0
        for skill in queryset:
            try:
                services.skill_import_remove(skill=skill, actor=request.user)
                removed += 1
            except (SkillImportError, OSError) as exc:
                self.message_user(request, _("%(skill_name)s: %(exc)s") % {"skill_name": skill.name, "exc": exc}, messages.ERROR)
        if removed:
            self.message_user(request, _("%(removed)s imported skill(s) removed.") % {"removed": removed}, messages.SUCCESS)

    # --- pages ---------------------------------------------------------------------------

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("sync/", wrap(self.sync_view), name="skills_registry_skillresource_sync"),
            path("import/", wrap(self.import_view), name="skills_registry_skillresource_import"),
            *super().get_urls(),
        ]

    def _changelist_url(self):
        return reverse("admin:skills_registry_skillresource_changelist")

    def sync_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self._report_sync(request, services.skills_sync(actor=request.user))
        return HttpResponseRedirect(self._changelist_url())

    def import_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        form = SkillImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                if data.get("folder"):
                    if not request.user.is_superuser:
                        raise PermissionDenied(_("only superusers may import a folder from the server's disk"))
                    outcome = services.skill_import_folder(
                        folder=data["folder"], scope=data["scope"], actor=request.user, replace=data["replace"]
                    )
                else:
                    upload = data["archive"]
                    outcome = services.skill_import_zip(
                        archive=upload,
                        scope=data["scope"],
                        actor=request.user,
                        replace=data["replace"],
                        original_name=upload.name,
                    )
            except SkillImportError as exc:
                form.add_error(None, f"Import refused: {exc}")
            else:
                skill = outcome.skill
                level = messages.SUCCESS if skill.status == SkillResource.Status.ACTIVE else messages.WARNING
                self.message_user(
                    request,
                    _("Imported %(skill_name)s into the %(skill_scope)s scope (status %(skill_status)s).") % {"skill_name": skill.name, "skill_scope": skill.scope, "skill_status": skill.status},
                    level,
                )
                return HttpResponseRedirect(reverse("admin:skills_registry_skillresource_change", args=[skill.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Import a skill"),
            "form": form,
        }
        return TemplateResponse(request, "admin/skills_registry/skillresource/import_form.html", context)
