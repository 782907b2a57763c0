"""Sessions in the staff console: meta, counters, diagnostics, and entries read-only.

The kernel shows; it does not write. ``AgentSessionAdmin`` here is read-only and
is registered by ``runtime/admin.py``, which adds the writes (title, agent,
status, delete) through the runtime's services; the entry and event tables are
read-only for everyone (a row changed behind the provider's back would skip the
revision, the event and the caches).

Entries are never rendered as a whole tree inline: the change page shows the
newest part of the active path as pretty JSON and links to two pages of their
own: the **tree** (every entry, paged, the leaf and the active path marked) and
the **context at** any entry (what the model is sent from there, with token
estimates: a replay of the conversation at that point). mysql-provider rows have
their own read-only, paginated list.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import BooleanField, Case, Value, When
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from sessions_tree import jsonl
from sessions_tree.admin_lists import LightListAdmin
from sessions_tree.context import estimate_context_tokens, estimate_tokens
from sessions_tree.errors import EntryNotFound, SessionTreeError
from sessions_tree.models import AgentSession, SessionEntry, SessionEvent
from sessions_tree.providers import get_provider
from sessions_tree.tree_text import content_text, entry_preview, tree_rows

ACTIVE_PATH_SHOWN = 50
TREE_ROWS_PER_PAGE = 1000


def pretty_json(value) -> str:
    """Stored JSON for people: indented; whatever it holds (lone surrogates, any depth) shows."""
    if isinstance(value, str):
        try:
            value = jsonl.loads(value)
        except ValueError:
            return value
    return jsonl.dumps_pretty(value)


class ViewOnly:
    """For admins and inlines: no add, change or delete, whatever the user's permissions."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ViewOnly, LightListAdmin):
    """Viewing only (``ViewOnly``), no actions; the list without the rows' blobs."""

    actions = None


class AgentSessionAdmin(LightListAdmin):
    """Sessions, read-only: the list, the change page as a view, the tree and context pages.

    The list loads no header, metadata, in-flight entry or diagnostics: whether a session
    has diagnostics is asked of the database.

    Registered by ``runtime/admin.py`` with the writes added there (they need the
    runtime's services, which this app may not import).
    """

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
        "console_links",
        "header_pretty",
        "diagnostics_pretty",
        "active_path",
    )
    fields = ("title", "status", "agent", "user", "metadata", *readonly_fields)

    def has_add_permission(self, request):
        return False  # sessions are created through the runtime, the API or session_import

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/tree/", wrap(self.tree_view), name="sessions_tree_agentsession_tree"),
            path("<path:object_id>/context/", wrap(self.context_view), name="sessions_tree_agentsession_context"),
            *super().get_urls(),
        ]

    def _session(self, request, object_id: str) -> AgentSession:
        meta = self.get_object(request, object_id)
        if meta is None or not self.has_view_permission(request, meta):
            raise Http404(_("no such session"))
        return meta

    def _page(self, request, meta: AgentSession, title: str, template: str, **context) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"admin/sessions_tree/agentsession/{template}",
            {**self.admin_site.each_context(request), "opts": self.model._meta, "original": meta, "title": title, **context},
        )

    def tree_view(self, request, object_id: str):
        """Every entry of the session as a tree, a page of rows at a time."""
        meta = self._session(request, object_id)
        provider = get_provider(meta.provider, using=meta._state.db or "default")
        try:
            _header, entries, leaf = provider.session_source(meta.session_id)
            active, path_error = provider.active_path_reported(meta.session_id)
        except (SessionTreeError, OSError) as exc:
            return self._page(request, meta, f"Tree of {meta}", "tree.html", error=str(exc), page=None)
        rows = list(tree_rows(entries, leaf_id=leaf, active_path=active))
        page = Paginator(rows, TREE_ROWS_PER_PAGE).get_page(request.GET.get("page"))
        shown = [(row, row.preview(140)) for row in page.object_list]  # previews for this page only
        return self._page(
            request, meta, f"Tree of {meta}", "tree.html",
            page=page, shown=shown, total=len(rows), leaf=leaf, error=None, path_error=path_error,
        )  # fmt: skip

    def context_view(self, request, object_id: str):
        """What the model is sent with the leaf at an entry (default: the session's leaf)."""
        meta = self._session(request, object_id)
        at = request.GET.get("at") or None
        provider = get_provider(meta.provider, using=meta._state.db or "default")
        try:
            ctx = provider.build_context(meta.session_id, at)
        except EntryNotFound:
            raise Http404(_("no entry “%(at)s” in this session") % {"at": at}) from None
        except (SessionTreeError, OSError) as exc:
            return self._page(request, meta, f"Context of {meta}", "context.html", error=str(exc), rows=[])
        rows = [
            {
                "position": i + 1,
                "entry_id": source,
                "role": m.get("role", "?") if isinstance(m, dict) else "?",
                "text": _message_text(m),
                "tokens": estimate_tokens(m),
            }
            for i, (m, source) in enumerate(zip(ctx.messages, ctx.source_entry_ids, strict=True))
        ]
        return self._page(
            request,
            meta,
            f"Context of {meta}",
            "context.html",
            at=at or meta.leaf_entry_id,
            rows=rows,
            total_tokens=estimate_context_tokens(ctx.messages),
            thinking_level=ctx.thinking_level,
            model=ctx.model,
            error=None,
        )

    @admin.display(description=_("console"))
    def console_links(self, obj):
        return format_html(
            '<a href="{}">Tree</a> · <a href="{}">Context at the leaf</a> · <a href="{}">Open in chat</a>',
            reverse("admin:sessions_tree_agentsession_tree", args=[obj.pk]),
            reverse("admin:sessions_tree_agentsession_context", args=[obj.pk]),
            reverse("pages:session", args=[obj.session_id]),
        )

    @admin.display(description=_("branches"), ordering="tip_count")
    def branches(self, obj):
        return obj.tip_count

    def list_queryset(self, queryset):
        empty = (When(diagnostics={}, then=Value(False)), When(diagnostics=None, then=Value(False)))
        return super().list_queryset(queryset).annotate(
            listed_has_diagnostics=Case(*empty, default=Value(True), output_field=BooleanField())
        )

    @admin.display(boolean=True, description=_("diagnostics"))
    def has_diagnostics(self, obj):
        listed = getattr(obj, "listed_has_diagnostics", None)  # the list: asked of the database
        return bool(obj.diagnostics) if listed is None else listed

    @admin.display(description=_("header"))
    def header_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.header))

    @admin.display(description=_("diagnostics"))
    def diagnostics_pretty(self, obj):
        data = dict(obj.diagnostics or {})
        try:
            data = get_provider(obj.provider, using=obj._state.db or "default").get_diagnostics(obj.session_id)
        except (SessionTreeError, OSError) as exc:
            data["readError"] = str(exc)
        if not data:
            return "none"
        return format_html("<pre>{}</pre>", pretty_json(data))

    @admin.display(description=format_lazy(_("active path (newest {n})"), n=ACTIVE_PATH_SHOWN))
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

    @admin.display(description=_("payload"))
    def payload_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.payload))


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ("session", "revision", "type", "actor", "created_at")
    list_filter = ("type",)
    search_fields = ("session__session_id",)
    list_select_related = ("session", "actor")
    show_full_result_count = False
    fields = ("session", "revision", "type", "actor", "created_at", "payload_pretty")
    readonly_fields = fields

    @admin.display(description=_("payload"))
    def payload_pretty(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.payload))


def _message_text(message) -> str:
    """A message's text for the context page (tool calls and results named, cut at 400 characters)."""
    if not isinstance(message, dict):
        return ""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        text = message.get("summary", "")
    elif role == "bashExecution":
        text = f"$ {message.get('command', '')}"
    else:
        content = message.get("content")
        text = content_text(content)
        blocks = content if isinstance(content, list) else []
        calls = [str(b.get("name", "?")) for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]
        if calls:
            text = (text + " " if text else "") + "→ " + ", ".join(calls)
    text = " ".join(str(text).split())
    return text if len(text) <= 400 else text[:399] + "…"
