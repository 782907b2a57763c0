"""Sessions in the console: the kernel's read-only session admin (sessions_tree/admin.py) plus the
writes of the session services (rename, archive, move the leaf, compact, fork, delete), and the
read-only share links."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery, Sum
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince
from django.utils.translation import gettext_lazy as _

from audit.models import AuditEntry
from audit.services import record
from runtime.admin.recorded_requests import recorded_request
from runtime.errors import RuntimeInputError
from runtime.models import (
    Agent,
    AgentRun,
    SessionShare,
    SubprocessRun,
)
from runtime.runs.prompts import run_abort
from runtime.runs.selectors import active_run
from runtime.sessions.services import (
    agent_for_session_change,
    clean_title,
    session_compact,
    session_delete,
    session_deletion_summary,
    session_fork,
    session_rename,
    session_set_agent,
    session_set_status,
    session_switch_leaf,
)
from runtime.sessions.permissions import session_decisions
from runtime.sessions.sharing import share_revoke
from sessions_tree.admin import AgentSessionAdmin, ViewOnly
from sessions_tree.admin_lists import (
    LightChangeList,
)
from sessions_tree.errors import SessionBusy, SessionNotFound, SessionTreeError
from sessions_tree.models import AgentSession

# --------------------------------------------------------------------------- sessions



def audit_log_url(user, session_id: str) -> str | None:
    """The audit log's entries about the session, for a user who may read the log."""
    opts = AuditEntry._meta
    if not user.has_perm(f"{opts.app_label}.view_{opts.model_name}"):
        return None
    return f"{reverse(f'admin:{opts.app_label}_{opts.model_name}_changelist')}?target_id={session_id}"

class SessionChangeForm(forms.ModelForm):
    """Title, agent and status: each change goes through its service in ``save_model``."""

    agent = forms.ChoiceField(help_text=_("Its next run uses this agent's model, tools and prompt."))

    class Meta:
        model = AgentSession
        fields = ("title", "agent", "status")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        agents = list(Agent.objects.order_by("name").values_list("name", "enabled"))
        choices = [(name, name if enabled else f"{name} (disabled)") for name, enabled in agents]
        current = self.instance.agent
        if current not in {name for name, _ in agents}:
            choices.insert(0, (current, f"{current or '(none)'} — no such agent: the default agent answers"))
        self.fields["agent"].choices = choices

    def clean_title(self):
        title = self.cleaned_data.get("title") or ""
        if title == self.instance.title:
            return title
        try:
            return clean_title(title)
        except RuntimeInputError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_agent(self):
        name = self.cleaned_data["agent"]
        if name != self.instance.agent:
            try:
                agent_for_session_change(meta=self.instance, agent_name=name)
            except RuntimeInputError as exc:
                raise forms.ValidationError(str(exc)) from None
        return name


class LastActivityFilter(admin.DateFieldListFilter):
    title = "last activity"


@admin.register(AgentSession)
class ConsoleSessionAdmin(AgentSessionAdmin):
    """The kernel's session pages plus the console's writes, each through a runtime service:
    title → ``session_rename`` (a Pi ``session_info`` entry), agent → ``session_set_agent``,
    status → ``session_set_status``, delete → ``session_delete`` (file, rows, runs; refused
    while a run is active). Nothing here saves the row itself."""

    form = SessionChangeForm
    list_display = (
        "session_cell", "user", "agent", "provider", "leaf", "entries", "branches", "compactions", "run_state", "last_activity",
        "total_cost", "diagnostics_flag",
    )  # fmt: skip
    list_filter = ("provider", "status", "agent", ("updated_at", LastActivityFilter))
    readonly_fields = ("runs_table", *AgentSessionAdmin.readonly_fields, "user", "metadata")
    fields = ("title", "agent", "status", *readonly_fields)
    actions = ["delete_selected"]
    delete_template = "admin/runtime/session/delete_sessions.html"
    change_form_template = "admin/runtime/session/change_form.html"

    # --- addressed by session id ---------------------------------------------------

    def get_object(self, request, object_id, from_field=None):
        """``object_id`` is the session id (``/admin/sessions_tree/agentsession/<session id>/``);
        a numeric primary key still works for old links."""
        meta = self.get_queryset(request).filter(session_id=object_id).first()
        if meta is None and str(object_id).isdigit():
            meta = super().get_object(request, object_id, from_field)
        return meta

    def get_changelist(self, request, **kwargs):
        return SessionChangeList

    @admin.display(description=_("console"))
    def console_links(self, obj):
        return format_html(
            '<a href="{}">Tree</a> · <a href="{}">Context at the leaf</a> · <a href="{}">Open in chat</a>',
            reverse("admin:sessions_tree_agentsession_tree", args=[obj.session_id]),
            reverse("admin:sessions_tree_agentsession_context", args=[obj.session_id]),
            reverse("pages:session", args=[obj.session_id]),
        )

    # --- the list: run state and cost in the rows' one query -----------------------

    def list_queryset(self, queryset):
        runs = AgentRun.objects.filter(session_id=OuterRef("session_id"))
        return super().list_queryset(queryset).annotate(
            listed_run_status=Subquery(runs.order_by("-created_at").values("status")[:1]),
            listed_cost=Subquery(runs.order_by().values("session_id").annotate(total=Sum("cost")).values("total")[:1]),
        )

    @admin.display(description=_("session"), ordering="title")
    def session_cell(self, obj):
        # The title to read, the id to address it by (the link goes to /<session id>/).
        return format_html('<strong>{}</strong><br><code class="console-id">{}</code>', obj.title or "(untitled)", obj.session_id)

    @admin.display(description=_("diagnostics"))
    def diagnostics_flag(self, obj):
        # Said when there are some; nothing (not a red ✗) when there are none.
        return mark_safe('<span class="pill pill-warn">yes</span>') if self.has_diagnostics(obj) else "—"

    @admin.display(description=_("leaf"))
    def leaf(self, obj):
        return format_html("<code>{}</code>", obj.leaf_entry_id) if obj.leaf_entry_id else "(none)"

    @admin.display(description=_("entries"), ordering="entry_count")
    def entries(self, obj):
        return obj.entry_count

    @admin.display(description=_("compactions"), ordering="compaction_count")
    def compactions(self, obj):
        return obj.compaction_count

    @admin.display(description=_("last activity"), ordering="updated_at")
    def last_activity(self, obj):
        return format_html('<span title="{}">{} ago</span>', obj.updated_at.isoformat(), timesince(obj.updated_at))

    @admin.display(description=_("run"))
    def run_state(self, obj):
        status = getattr(obj, "listed_run_status", None)
        if status is None:
            return "—"
        return format_html('<span class="console-badge {}">{}</span>', status, status)

    @admin.display(description=_("cost $"))
    def total_cost(self, obj):
        cost = getattr(obj, "listed_cost", None)
        return "—" if cost is None else f"{cost:.4f}"

    # --- the page: runs, subagent runs, actions ----------------------------------

    @admin.display(description=_("runs"))
    def runs_table(self, obj):
        runs = list(
            AgentRun.objects.filter(session_id=obj.session_id).defer("prompt", "images", "error").select_related("user").order_by("-created_at")[:50]
        )
        children = list(
            SubprocessRun.objects.filter(session_id=obj.session_id).only(
                "run_id", "agent", "task_index", "status", "parent_run_id", "created_at"
            ).order_by("-created_at")[:50]
        )  # fmt: skip
        if not runs and not children:
            return "no runs"
        run_rows = format_html_join(
            "", '<tr><td><a href="{}"><code>{}</code></a></td><td><span class="console-badge {}">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (reverse("admin:runtime_agentrun_change", args=[r.pk]), str(r.run_id)[:8], r.status, r.status,
                 r.user or "—", r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.output_tokens, f"{r.cost:.4f}")
                for r in runs
            ),
        )  # fmt: skip
        child_rows = format_html_join(
            "", '<tr data-subagent-run="{}"><td><a href="{}"><code>{}</code></a></td><td><span class="console-badge {}">{}</span></td><td>{}</td><td>task {}</td><td colspan="2">{}</td></tr>',
            (
                (c.run_id, reverse("admin:runtime_subprocessrun_change", args=[c.pk]), str(c.run_id)[:8], c.status, c.status, c.agent,
                 c.task_index, c.created_at.strftime("%Y-%m-%d %H:%M:%S"))
                for c in children
            ),
        )  # fmt: skip
        return format_html(
            '<table class="console-table"><thead><tr><th>run</th><th>status</th><th>user / agent</th><th>created</th>'
            "<th>output tokens</th><th>cost $</th></tr></thead><tbody>{}</tbody></table>{}",
            run_rows,
            format_html('<h4>Subagent runs</h4><table class="console-table"><tbody>{}</tbody></table>', child_rows) if children else "",
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        mine = [
            path("<path:object_id>/rename/", wrap(self.rename_view), name="sessions_tree_agentsession_rename"),
            path("<path:object_id>/leaf/", wrap(self.leaf_view), name="sessions_tree_agentsession_leaf"),
            path("<path:object_id>/compact/", wrap(self.compact_view), name="sessions_tree_agentsession_compact"),
            path("<path:object_id>/fork/", wrap(self.fork_view), name="sessions_tree_agentsession_fork"),
            path("<path:object_id>/archive/", wrap(self.archive_view), name="sessions_tree_agentsession_archive"),
            path("<path:object_id>/abort/", wrap(self.abort_view), name="sessions_tree_agentsession_abort"),
        ]
        return [*mine, *super().get_urls()]

    def _writable(self, request, object_id) -> AgentSession:
        if request.method != "POST":
            raise PermissionDenied  # actions change things: POST only (the page's buttons)
        meta = self.get_object(request, object_id)
        if meta is None:
            raise Http404(_("no such session"))
        if not self.has_change_permission(request, meta):
            raise PermissionDenied
        return meta

    def _done(self, request, meta, text: str, level=messages.SUCCESS):
        self.message_user(request, text, level)
        return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_change", args=[meta.session_id]))

    def _refused(self, request, meta, exc):
        return self._done(request, meta, f"Refused: {exc}", messages.ERROR)

    def rename_view(self, request, object_id):
        """The title, through ``session_rename`` (a Pi ``session_info`` entry; refused empty or too long)."""
        meta = self._writable(request, object_id)
        try:
            session_rename(session_id=meta.session_id, title=clean_title(request.POST.get("title") or ""), actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        meta.refresh_from_db()
        return self._done(request, meta, f"Renamed: {meta.title}")

    def leaf_view(self, request, object_id):
        """Move the leaf to an entry (empty: before the first entry), through ``session_switch_leaf``."""
        meta = self._writable(request, object_id)
        entry_id = (request.POST.get("entry_id") or "").strip() or None
        try:
            result = session_switch_leaf(session_id=meta.session_id, entry_id=entry_id, actor=request.user, summarize=request.POST.get("summarize") == "on")
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, f"The leaf is now {result.get('leafId') or 'before the first entry'}.")

    def compact_view(self, request, object_id):
        meta = self._writable(request, object_id)
        try:
            session_compact(session_id=meta.session_id, actor=request.user, instructions=request.POST.get("instructions") or None)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, "Compacted: a compaction entry now summarizes the older part of the path.")

    def fork_view(self, request, object_id):
        meta = self._writable(request, object_id)
        entry_id = (request.POST.get("entry_id") or "").strip() or meta.leaf_entry_id
        try:
            fork = session_fork(session_id=meta.session_id, entry_id=entry_id or "", actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, fork, f"Forked at {entry_id}: this is the new session (owned by you).")

    def archive_view(self, request, object_id):
        meta = self._writable(request, object_id)
        status = "active" if meta.status == "archived" else "archived"
        try:
            session_set_status(session_id=meta.session_id, status=status, actor=request.user)
        except (SessionTreeError, RuntimeInputError) as exc:
            return self._refused(request, meta, exc)
        return self._done(request, meta, f"The session is {status}.")

    def abort_view(self, request, object_id):
        meta = self._writable(request, object_id)
        if not request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun"):
            raise PermissionDenied
        run = run_abort(session_id=meta.session_id, actor=request.user)
        return self._done(request, meta, "No run was active." if run is None else f"Asked run {run.run_id} to stop ({run.status}).")

    def context_view(self, request, object_id: str):
        """The kernel's page, with the recorded request that produced the entry (its trace) above it."""
        response = super().context_view(request, object_id)
        if isinstance(response, TemplateResponse) and self.has_change_permission(request, response.context_data.get("original")):
            response.context_data["leaf_action_url"] = reverse("admin:sessions_tree_agentsession_leaf", args=[response.context_data["original"].session_id])
        if isinstance(response, TemplateResponse) and not response.context_data.get("error"):
            response.template_name = "admin/runtime/session/context.html"
            response.context_data["recorded"] = recorded_request(response.context_data["original"].session_id, response.context_data.get("at") or "")
        return response

    def has_change_permission(self, request, obj=None):
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    # --- change ------------------------------------------------------------------

    @csrf_protect_m
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Not inside Django's request-wide transaction: each service runs its own, taking the
        # store's lock before the row's (on SQLite an outer transaction would hold the
        # database's write lock while waiting for the file's).
        if object_id is not None:
            meta = self.get_object(request, object_id)
            if meta is not None:
                run = active_run(meta.session_id)
                try:
                    decisions, decisions_total = session_decisions(meta)
                    decisions_error = ""
                except (SessionTreeError, OSError) as exc:  # a broken tree or a file removed by hand: the page still opens
                    decisions, decisions_total, decisions_error = [], 0, str(exc)
                extra_context = {
                    **(extra_context or {}), "active_run": run, "session_meta": meta, "title": _("Session"),
                    "can_abort": request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun"),
                    "decisions": decisions, "decisions_total": decisions_total, "decisions_error": decisions_error,
                    "audit_url": audit_log_url(request.user, meta.session_id),
                    # The live tree (static/console/session_live.js): the chat page's socket, read-only here.
                    "live_data": {
                        "sessionId": meta.session_id, "socket": f"/ws/sessions/{meta.session_id}/",
                        "heartbeatSeconds": settings.NETA_WS_HEARTBEAT_SECONDS,
                    },
                }  # fmt: skip
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        sid = obj.session_id
        writes = {
            "title": lambda value: session_rename(session_id=sid, title=value, actor=request.user),
            "agent": lambda value: session_set_agent(session_id=sid, agent_name=value, actor=request.user),
            "status": lambda value: session_set_status(session_id=sid, status=value, actor=request.user),
        }
        try:
            for field in form.changed_data:
                writes[field](form.cleaned_data[field])
        except (SessionTreeError, RuntimeInputError) as exc:
            request._console_refused = True
            self.message_user(request, _("Not saved: %(exc)s") % {"exc": exc}, messages.ERROR)
        try:
            obj.refresh_from_db()  # what the services stored (the title as the session_info entry set it)
        except AgentSession.DoesNotExist:
            request._console_refused = True

    def log_change(self, request, obj, message):
        if not getattr(request, "_console_refused", False):
            return super().log_change(request, obj, message)

    def save_related(self, request, form, formsets, change):
        pass  # no relations are edited here

    def response_change(self, request, obj):
        if getattr(request, "_console_refused", False):
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    # --- delete ------------------------------------------------------------------

    def delete_model(self, request, obj):
        session_delete(session_id=obj.session_id, actor=request.user)

    def delete_queryset(self, request, queryset):
        for meta in queryset:
            session_delete(session_id=meta.session_id, actor=request.user)

    def _confirm_delete(self, request, sessions, *, action: bool):
        summaries = []
        for meta in sessions:
            try:
                summaries.append(session_deletion_summary(session_id=meta.session_id))
            except SessionNotFound:
                continue
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Delete sessions" if len(summaries) != 1 else f"Delete {summaries[0]['session']}",
            "summaries": summaries,
            "deletable": [s for s in summaries if s["active_run"] is None],
            "action": action,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, self.delete_template, context)

    def _delete(self, request, sessions) -> list:
        """``session_delete`` each session; report what went and what was refused, and why."""
        deleted, busy = [], []
        for meta in sessions:
            try:
                session_delete(session_id=meta.session_id, actor=request.user)
            except SessionBusy:
                busy.append(meta)
            except SessionNotFound:
                continue  # gone meanwhile
            except (SessionTreeError, OSError) as exc:  # e.g. its file was removed by hand
                self.message_user(request, _("Not deleted: %(meta)s: %(exc)s") % {"meta": meta, "exc": exc}, messages.ERROR)
            else:
                deleted.append(meta)
        if deleted:
            self.log_deletions(request, deleted)
            self.message_user(request, _("Deleted %(len_deleted)s session(s) with their entries and runs.") % {"len_deleted": len(deleted)}, messages.SUCCESS)
        if busy:
            names = ", ".join(str(m) for m in busy)
            self.message_user(request, _("Not deleted, a run is active (abort it first): %(names)s.") % {"names": names}, messages.ERROR)
        return deleted

    @csrf_protect_m
    def delete_view(self, request, object_id, extra_context=None):
        meta = self.get_object(request, object_id)
        if meta is None:
            raise Http404(_("no such session"))
        if not self.has_delete_permission(request, meta):
            raise PermissionDenied
        if request.method == "POST" and request.POST.get("post") == "yes":
            if self._delete(request, [meta]):
                return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_changelist"))
            return HttpResponseRedirect(reverse("admin:sessions_tree_agentsession_change", args=[meta.session_id]))
        return self._confirm_delete(request, [meta], action=False)

    @admin.action(description=_("Delete selected sessions (files, entries and runs)"), permissions=["delete"])
    def delete_selected(self, request, queryset):
        sessions = list(queryset)
        if request.POST.get("post") == "yes":
            self._delete(request, sessions)
            return None  # back to the list
        return self._confirm_delete(request, sessions, action=True)


class SessionChangeList(LightChangeList):
    """A session's row links to its session id, not its primary key."""

    def url_for_result(self, result):
        return reverse("admin:sessions_tree_agentsession_change", args=[result.session_id], current_app=self.model_admin.admin_site.name)



# --------------------------------------------------------------------------- share links


@admin.register(SessionShare)
class SessionShareAdmin(ViewOnly, admin.ModelAdmin):
    """The chat page's read-only share links (docs/chat.md, "Share"): who shared what, when,
    how often it was opened; staff who may change sessions revoke them."""

    list_display = ("session_id", "title", "created_by", "created_at", "revoked_at", "views", "link")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("session__session_id", "title", "created_by__username")
    list_select_related = ("created_by",)
    readonly_fields = ("session", "leaf_entry_id", "title", "created_by", "created_at", "revoked_at", "views", "link")
    exclude = ("token",)
    actions = ["revoke_links"]

    @admin.display(description=_("link"))
    def link(self, obj):
        if obj.revoked_at:
            return "revoked"
        return format_html('<a href="/share/{}/" target="_blank" rel="noopener">open</a>', obj.token)

    def has_revoke_permission(self, request):
        return request.user.has_perm("sessions_tree.change_agentsession")

    @admin.action(description=_("Revoke the selected share links"), permissions=["revoke"])
    def revoke_links(self, request, queryset):
        count = 0
        for share in queryset.filter(revoked_at__isnull=True):
            share_revoke(share)
            record(actor=request.user, action="session.share_revoke", target=("sessions_tree.agentsession", share.session_id, share.title))
            count += 1
        self.message_user(request, _("revoked %(count)s share link(s)") % {"count": count}, messages.SUCCESS)
