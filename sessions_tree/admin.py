"""Sessions in the staff console: meta, counters, diagnostics, and entries read-only.

Entries are never rendered as a whole tree inline: the change page shows the
newest part of the active path as pretty JSON, and mysql-provider rows have
their own read-only, paginated list.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from sessions_tree.errors import SessionTreeError
from sessions_tree.models import AgentSession, SessionEntry, SessionEvent
from sessions_tree.providers import get_provider
from sessions_tree.tree_text import entry_preview

ACTIVE_PATH_SHOWN = 50


def pretty_json(value) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = (
        "session_id",
        "title",
        "provider",
        "agent",
        "user",
        "leaf_entry_id",
        "entry_count",
        "branches",
        "compaction_count",
        "revision",
        "updated_at",
        "has_diagnostics",
    )
    list_filter = ("provider", "status", "agent")
    search_fields = ("session_id", "title", "agent", "user__username")
    list_select_related = ("user",)
    show_full_result_count = False
    readonly_fields = (
        "session_id",
        "provider",
        "leaf_entry_id",
        "root_entry_id",
        "revision",
        "session_file",
        "cwd",
        "parent_session_id",
        "entry_count",
        "message_count",
        "tip_count",
        "compaction_count",
        "branch_summary_count",
        "label_count",
        "in_flight_entry_id",
        "created_at",
        "updated_at",
        "header_pretty",
        "diagnostics_pretty",
        "active_path",
    )
    fields = ("title", "status", "agent", "user", "metadata", *readonly_fields)

    def has_add_permission(self, request):
        return False  # sessions are created through the runtime, the API or session_import

    @admin.display(description="branches", ordering="tip_count")
    def branches(self, obj):
        return obj.tip_count

    @admin.display(boolean=True, description="diagnostics")
    def has_diagnostics(self, obj):
        return bool(obj.diagnostics)

    @admin.display(description="header")
    def header_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.header))

    @admin.display(description="diagnostics")
    def diagnostics_pretty(self, obj):
        data = dict(obj.diagnostics or {})
        try:
            index = get_provider(obj.provider, using=obj._state.db or "default")._store_index(obj)
            if index.diagnostics:
                data["read"] = index.diagnostics
        except (SessionTreeError, OSError) as exc:
            data["readError"] = str(exc)
        if not data:
            return "none"
        return format_html("<pre>{}</pre>", pretty_json(data))

    @admin.display(description=f"active path (newest {ACTIVE_PATH_SHOWN})")
    def active_path(self, obj):
        try:
            path = get_provider(obj.provider, using=obj._state.db or "default").get_active_path(obj.session_id)
        except (SessionTreeError, OSError) as exc:
            return f"cannot read the session: {exc}"
        shown = path[-ACTIVE_PATH_SHOWN:]
        header = f"{len(path)} entries on the active path" + (f", newest {len(shown)} shown" if len(shown) < len(path) else "")
        rows = format_html_join(
            "",
            "<details><summary><code>{}</code> {}</summary><pre>{}</pre></details>",
            ((e["id"], entry_preview(e, 120), pretty_json(e)) for e in shown),
        )
        return format_html("<p>{}</p>{}", header, rows)


@admin.register(SessionEntry)
class SessionEntryAdmin(ReadOnlyAdmin):
    list_display = ("entry_id", "session", "seq", "type", "role", "status", "parent_entry_id", "timestamp")
    list_filter = ("type", "status")
    search_fields = ("entry_id", "session__session_id")
    list_select_related = ("session",)
    show_full_result_count = False
    fields = ("session", "entry_id", "parent_entry_id", "seq", "type", "role", "status", "shadowed", "timestamp", "payload_pretty")
    readonly_fields = fields

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.payload))

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ("session", "revision", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("session__session_id",)
    list_select_related = ("session",)
    show_full_result_count = False
    fields = ("session", "revision", "type", "created_at", "payload_pretty")
    readonly_fields = fields

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.payload))

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")
