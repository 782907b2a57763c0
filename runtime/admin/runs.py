"""Runs and subagent runs in the console: read-only pages, the abort and cancel actions (through
the runs' services), the run's notes and feedback."""

from __future__ import annotations

import datetime as dt
import json
import uuid

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Count, OuterRef, Prefetch, Q, Subquery
from django.db.models.functions import Substr
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from runtime.admin.common import ERROR_SHOWN, grouped
from runtime.api.views.traces import rebuilt_body, recorded_parts, run_spans
from runtime.models import (
    Agent,
    AgentRun,
    ModelCall,
    RunInput,
    SubagentApproval,
    SubprocessRun,
)
from runtime.runs.prompts import run_abort
from runtime.sessions.sharing import run_feedback
from runtime.subagents.services import subprocess_run_cancel
from sessions_tree.admin import ViewOnly
from sessions_tree.admin_lists import (
    LightListAdmin,
    LightRelatedFilter,
)


class RunInputInline(ViewOnly, admin.TabularInline):
    """A run's queued follow-ups and steers, as the runtime stored them (prompts add them)."""

    model = RunInput
    extra = 0
    can_delete = False
    readonly_fields = ("kind", "text", "consumed", "created_at")
    fields = readonly_fields

    def get_queryset(self, request):
        return super().get_queryset(request).defer("images")  # not shown here (a prompt's images: megabytes)


class SubagentApprovalInline(ViewOnly, admin.TabularInline):
    """A child's calls that waited for a person, and what was decided (docs/subagents.md, "Approvals")."""

    model = SubagentApproval
    extra = 0
    can_delete = False
    readonly_fields = ("tool_call_id", "tool", "status", "scope", "prefix", "note", "decided_by", "decided_at", "created_at", "expires_at")
    fields = readonly_fields


@admin.register(SubprocessRun)
class SubprocessRunAdmin(ViewOnly, LightListAdmin):
    """Subagent children: the host's records (docs/subagents.md); read-only, cancel through the service."""

    list_display = ("run_id", "session_id", "agent", "task_index", "status", "error_code", "pid", "event_count", "created_at")
    list_filter = ("status", "mode", "backend")

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "parent_run__id__exact" or super().lookup_allowed(lookup, value, request)  # the runs list links here
    search_fields = ("run_id", "session_id", "batch_id")
    show_full_result_count = False
    readonly_fields = ["transcript", *(f.name for f in SubprocessRun._meta.fields if f.name != "envelope")]
    exclude = ("envelope",)
    inlines = [SubagentApprovalInline]

    @admin.display(description=_("transcript"))
    def transcript(self, obj):
        """The child's recorded events as it worked (runtime/subagents/protocol.py): its text in
        whole passages, each tool call and result, how it ended — each at its time from the start."""
        return child_transcript(obj)
    actions = ["cancel_runs"]

    def has_cancel_permission(self, request):
        return request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun")

    @admin.action(description=_("Cancel the selected subagent runs"), permissions=["cancel"])
    def cancel_runs(self, request, queryset):
        count = 0
        for run in queryset:
            if run.is_active:
                subprocess_run_cancel(run, by=f"staff {request.user.username} (console)", actor=request.user)
                count += 1
        self.message_user(request, _("asked %(count)s subagent run(s) to stop") % {"count": count})


class RunDateFilter(admin.DateFieldListFilter):
    title = "created"


@admin.register(AgentRun)
class AgentRunAdmin(ViewOnly, LightListAdmin):
    """Runs: who, which agent and model, how long, what it cost, how it ended (the error's first
    line, cut in the database: the column itself may be long), with links to the session and
    the run's subagent children. Searchable by run, session, user and agent; filterable by date."""

    list_display = (
        "run_id_short", "user", "agent", "model_used", "status", "duration", "tokens", "cost_usd", "error_head", "session_link",
        "subagent_link", "aborted_by", "created_at",
    )
    list_filter = ("status", ("created_at", RunDateFilter), ("agent", LightRelatedFilter))
    search_fields = ("=run_id", "=session_id", "user__username", "agent__name")  # as get_search_results reads them
    search_help_text = _("A run or session id (whole), or part of a user's or agent's name.")

    def get_search_results(self, request, queryset, search_term):
        """The search_fields, but the names are looked up in the users' and agents' tables first and
        the runs filtered by those ids: no join, so the runs' indexes answer (a joined LIKE over
        100k runs takes seconds)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        users = get_user_model().objects.filter(username__icontains=term).values_list("id", flat=True)[:1000]
        agents = Agent.objects.filter(name__icontains=term).values_list("id", flat=True)[:1000]
        match = Q(session_id=term) | Q(user_id__in=list(users)) | Q(agent_id__in=list(agents))
        try:
            match |= Q(run_id=uuid.UUID(term))
        except ValueError:
            pass
        return queryset.filter(match), False
    # Prefetched, not joined (see list_queryset): no list_select_related.
    list_select_related = ()
    list_per_page = 50
    show_full_result_count = False
    readonly_fields = [*(f.name for f in AgentRun._meta.fields), "session_page", "model_used", "run_notes", "feedback", "trace"]
    inlines = [RunInputInline]
    page_groups = (
        (None, ("run_id", "status", "error", "run_notes", "feedback", "session_page", "agent", "user", "model_used", "created_at", "started_at", "finished_at", "cancelled_by")),
        ("Trace", ("trace",)),
        ("Tokens and cost", ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost", "rounds")),
        ("Prompt", ("prompt", "images", "from_entry_id", "prompt_entry_id", "question", "waiting_since", "session_id", "model_name")),
        ("Where it ran", (
            "backend", "worker", "host", "pid", "process_started", "submitted_at", "submissions", "heartbeat_at", "cancel_requested",
            "in_flight_entry_id",
        ), ("collapse",)),
    )  # fmt: skip

    def get_fieldsets(self, request, obj=None):
        return grouped(self.get_fields(request, obj), self.page_groups, rest="More")
    actions = ["abort_runs"]

    def list_queryset(self, queryset):
        children = (
            SubprocessRun.objects.filter(parent_run=OuterRef("pk")).order_by().values("parent_run").annotate(n=Count("id")).values("n")
        )
        # The agent, its model and the users come in three small queries after the page's: joined,
        # the database may start from the agents and sort every run (seconds at 100k runs) where
        # the runs' created_at index alone yields the page (bench/console_lists.py).
        users = get_user_model().objects.only("id", "username")
        return (
            super()
            .list_queryset(queryset)
            .annotate(error_first=Substr("error", 1, ERROR_SHOWN), subagent_total=Subquery(children))
            .prefetch_related(
                Prefetch("agent", queryset=Agent.objects.select_related("model").only("id", "name", "model__name")),
                Prefetch("user", queryset=users),
                Prefetch("cancelled_by", queryset=users),
            )
        )

    @admin.display(description=_("run"), ordering="created_at")
    def run_id_short(self, obj):
        return str(obj.run_id)[:8]

    @admin.display(description=_("model"))
    def model_used(self, obj):
        # What the run recorded (the model that answered); a run from before it did: its
        # override, else its agent's model now.
        name = obj.answered_model or obj.model_name or obj.agent.model.name
        if "notes" in obj.get_deferred_fields():  # the list (no blobs loaded): the run page says more
            return name
        notes = [n for n in (obj.notes or []) if n.get("kind") == "failover" and n.get("model")]
        if not notes:
            return name
        failed = [m for n in notes for m in (n.get("failed") or [])]
        answered = ", ".join(dict.fromkeys(n["model"] for n in notes))
        first = failed[0] if failed else obj.model_name or obj.agent.model.name
        return f"{first} (answered by {answered} after a failover)"

    @admin.display(description=_("notes"))
    def run_notes(self, obj):
        """What the run did on its own (runtime/runs/notes.py): failovers, clamped thinking levels."""
        notes = obj.notes or []
        if not notes:
            return "none"
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}: {}</li>", ((n.get("kind", ""), n.get("text", "")) for n in notes)))

    @admin.display(description=_("feedback"))
    def feedback(self, obj):
        """👍 / 👎 and notes the chat page stored on this run's answers (neta.feedback entries)."""
        given = run_feedback(obj)
        if not given:
            return "none"
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", "<li>{} {}{} <span class=\"muted\">({}, answer {})</span></li>", (
                ("👍" if f["rating"] == "up" else "👎", f.get("note") or "", "", f.get("by") or "?", f["entryId"][:8]) for f in given
            )),
        )  # fmt: skip

    @admin.display(description=_("what happened"))
    def trace(self, obj):
        """The run's spans as a waterfall (runtime/api/views/traces.py): each model call, tool call
        and child on the run's time axis; a model call opens the request it sent, rebuilt."""
        return trace_waterfall(obj)

    @admin.display(description=_("duration"))
    def duration(self, obj):
        if not obj.started_at:
            return "—"
        end = obj.finished_at or timezone.now()
        seconds = (end - obj.started_at).total_seconds()
        return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"

    @admin.display(description=_("cost $"), ordering="cost")
    def cost_usd(self, obj):
        return f"{obj.cost:.4f}"

    @admin.display(description=_("tokens in / out"))
    def tokens(self, obj):
        return f"{obj.input_tokens} / {obj.output_tokens}"

    @admin.display(description=_("error"))
    def error_head(self, obj):
        text = getattr(obj, "error_first", "") or ""
        if not text:
            return ""
        line = text.splitlines()[0] if text.strip() else text
        return format_html('<span class="error-text">{}{}</span>', line[:160], "…" if len(text) >= ERROR_SHOWN or len(line) > 160 else "")

    @admin.display(description=_("session"))
    def session_link(self, obj):
        url = reverse("admin:sessions_tree_agentsession_change", args=[obj.session_id])  # the session's page, by its id
        return format_html('<a href="{}" title="{}">{}</a>', url, obj.session_id, obj.session_id[:13])

    @admin.display(description=_("session"))
    def session_page(self, obj):
        url = reverse("admin:sessions_tree_agentsession_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a>', url, obj.session_id)

    @admin.display(description=_("subagents"))
    def subagent_link(self, obj):
        n = getattr(obj, "subagent_total", None) or 0
        if not n:
            return "—"
        url = reverse("admin:runtime_subprocessrun_changelist") + f"?parent_run__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, n)

    @admin.display(description=_("aborted by"))
    def aborted_by(self, obj):
        return obj.cancelled_by.get_username() if obj.cancelled_by_id else ""

    # Runs are the runtime's records: no add or edit, and no delete (ViewOnly: they go with
    # their session, through session_delete). Staff who may change runs may abort them.
    def has_abort_permission(self, request):
        return request.user.has_perm(f"{AgentRun._meta.app_label}.change_agentrun")

    @admin.action(description=_("Abort the selected runs"), permissions=["abort"])
    def abort_runs(self, request, queryset):
        count = 0
        for run in queryset:
            if run.is_active:
                run_abort(run=run, actor=request.user)
                count += 1
        self.message_user(request, _("asked %(count)s run(s) to stop") % {"count": count}, messages.SUCCESS)


TRACE_REQUESTS_SHOWN = 20  # model calls whose rebuilt request the page embeds (the API has them all)
KIND_COLOURS = {"model_call": "#417690", "tool_call": "#7a9a01", "subagent": "#a05a2c"}
KIND_LABELS = {"model_call": _("model call"), "tool_call": _("tool call"), "subagent": _("subagent")}


def trace_waterfall(run):
    """A table, a row per span under the run: kind, name, when it started after the run and for
    how long (as a bar on the run's time axis), what it says; a model call opens its request."""
    spans = run_spans(run)
    rest = spans[1:]
    if not rest:
        return _("no model or tool call recorded")
    start = min(dt.datetime.fromisoformat(s["start"]) for s in spans if s["start"])
    ends = [dt.datetime.fromisoformat(s["end"]) for s in spans if s["end"]]
    total = max((max(ends) - start).total_seconds(), 0.001) if ends else 0.001
    calls = {c.pk: c for c in ModelCall.objects.filter(run=run)}
    parents = {s["id"]: s["parent"] for s in rest}
    rows = []
    for index, span in enumerate(rest):
        depth, up = 0, span["parent"]
        while up in parents and depth < 8:  # under a subagent (a child's call, a grandchild): indented
            depth, up = depth + 1, parents[up]
        began = dt.datetime.fromisoformat(span["start"]) if span["start"] else start
        ended = dt.datetime.fromisoformat(span["end"]) if span["end"] else began
        offset, length = (began - start).total_seconds(), max((ended - began).total_seconds(), 0)
        a = span["attributes"]
        if span["kind"] == "model_call":
            usage = a.get("usage") or {}
            what = f"{a['stopReason'] or '—'} · ↑{usage.get('input', 0)} ↓{usage.get('output', 0)} · ${a['cost']}"
            what += " · " + _("first token %(ms)s ms") % {"ms": a["timeToFirstTokenMs"]} if a.get("timeToFirstTokenMs") is not None else ""
            what += f" · {a['error'][:200]}" if a.get("error") else ""
        elif span["kind"] == "tool_call":
            what = f"{a['outcome']} · " + _("%(size)s bytes of arguments") % {"size": a["argumentsSize"]}
        else:
            what = f"{a['status']}" + (f" · {a['error'][:200]}" if a.get("error") else "")
        detail = ""
        if span["kind"] == "model_call" and index < TRACE_REQUESTS_SHOWN:
            call = calls.get(int(span["id"].split(":", 1)[1]))
            body = rebuilt_body(call) if call is not None else None
            if body is not None:
                detail = format_html(
                    '<details class="trace-request"><summary>{}</summary><pre>{}</pre></details>',
                    _("request sent"), json.dumps(body, ensure_ascii=False, indent=2)[:200_000],
                )
            elif call is not None and call.subprocess_run_id is not None:
                detail = format_html(
                    '<details class="trace-request"><summary>{}</summary><p class="help">{}</p><pre>{}</pre></details>',
                    _("request recorded, without its messages"),
                    _("A subagent's messages lived in its process: its system prompt, tools and settings are recorded, its messages are not."),
                    json.dumps(recorded_parts(call), ensure_ascii=False, indent=2)[:200_000],
                )
        rows.append(
            format_html(
                '<tr data-kind="{}"><td data-depth="{}" style="padding-left:{}em">{}{}</td><td><code>{}</code></td><td>{} s</td><td>{} s</td>'
                '<td style="min-width:220px"><div style="margin-left:{}%;width:{}%;min-width:2px;height:10px;background:{}"></div></td><td>{}{}</td></tr>',
                span["kind"], depth, 0.5 + 1.2 * depth, "↳ " if depth else "", KIND_LABELS.get(span["kind"], span["kind"]), span["name"], f"{offset:.2f}", f"{length:.2f}",
                round(100 * offset / total, 2), round(100 * length / total, 2), KIND_COLOURS.get(span["kind"], "#888"), what, detail,
            )  # fmt: skip
        )
    return format_html(
        '<div style="overflow-x:auto"><table class="console-table trace-waterfall" style="min-width:760px"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th></th></tr></thead><tbody>{}</tbody></table></div>',
        _("kind"), _("name"), _("start"), _("took"), _("%(seconds)s s in all") % {"seconds": f"{total:.2f}"}, format_html_join("", "{}", ((r,) for r in rows)),
    )


TRANSCRIPT_EVENTS_READ = 5000  # a child's events the page folds (the table keeps them all)
TRANSCRIPT_TEXT_SHOWN = 2000  # characters of a tool result or argument list shown


def _short(value, limit: int = TRANSCRIPT_TEXT_SHOWN) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def transcript_rows(events) -> list[tuple[float, str, str]]:
    """(seconds from the first event, kind, text) per step: streamed deltas joined into one
    passage until something else happens; heartbeats left out."""
    rows: list[tuple[float, str, str]] = []
    start = None
    passage: list[str] = []
    passage_at = 0.0

    def close_passage():
        if passage:
            rows.append((passage_at, "text", "".join(passage)))
            passage.clear()

    for event in events:
        payload = event.payload if isinstance(event.payload, dict) else {}
        at = float(payload.get("ts") or 0) / 1000 if payload.get("ts") else event.created_at.timestamp()
        start = at if start is None else start
        offset = at - start
        if event.type == "heartbeat":
            continue
        if event.type == "assistant_delta":
            if not passage:
                passage_at = offset
            passage.append(str(payload.get("delta") or ""))
            continue
        if event.type == "assistant_message":
            streamed = bool(passage)
            close_passage()
            if not streamed:
                message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
                text = "".join(b.get("text", "") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "text")
                if text:
                    rows.append((offset, "text", text))
            continue
        close_passage()
        if event.type == "tool_call":
            rows.append((offset, "tool call", f"{payload.get('name', '?')} {_short(payload.get('arguments') or {})}"))
        elif event.type == "tool_result":
            rows.append((offset, "tool result" + (" (error)" if payload.get("isError") else ""), f"{payload.get('name', '')} {_short(payload.get('preview') or '')}"))
        elif event.type in ("run_end", "run_error"):
            rows.append((offset, "end", " ".join(str(payload.get(k)) for k in ("status", "code", "message") if payload.get(k))))
        else:
            rows.append((offset, event.type.replace("_", " "), _short({k: v for k, v in payload.items() if k not in ("v", "seq", "ts", "type")}, 300)))
    close_passage()
    return rows


def child_transcript(child):
    events = child.events.order_by("seq")[:TRANSCRIPT_EVENTS_READ]
    rows = transcript_rows(events)
    if not rows:
        return _("no event recorded")
    return format_html(
        '<table class="console-table child-transcript"><thead><tr><th>{}</th><th>{}</th><th></th></tr></thead><tbody>{}</tbody></table>',
        _("at"), _("step"),
        format_html_join("", '<tr><td>{} s</td><td>{}</td><td style="white-space:pre-wrap">{}</td></tr>', ((f"{at:.1f}", kind, text) for at, kind, text in rows)),
    )
