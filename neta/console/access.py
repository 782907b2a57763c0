"""The console's Access page: who may use each agent, and what each staff account may do.

Both halves read the rules that decide, they do not restate them: an agent's users and groups
(``runtime.agents.access``, enforced by the API, the socket and the chat page) and Django's
permissions, which the console pages, the API and the socket check (``runtime.sessions.access``
for sessions). The page changes nothing: an agent's access is edited on its own page
(``agent_set_access``), accounts and groups on Django's user and group pages (audited).
"""

from __future__ import annotations

from collections import defaultdict

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models import Prefetch
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_safe

from runtime.models import Agent

# (area, app label, model name, what "change" lets one do there, what "delete" lets one do)
AREAS = (
    (_("Sessions"), "sessions_tree", "agentsession", _("prompt, rename, archive, move the leaf, compact, fork"), _("delete with entries and runs")),
    (_("Runs"), "runtime", "agentrun", _("abort runs and subagent runs"), ""),
    (_("Agents"), "runtime", "agent", _("edit settings, policies and who may use them"), _("delete unused agents")),
    (_("Models"), "runtime", "modelconfig", _("edit prices, limits and options, test the connection (where a key goes: the next column)"), _("delete unused models")),
    (_("Tools"), "toolcatalog", "toolconfig", _("governance: enable, subagents, route, renderer"), ""),
    (_("MCP servers"), "toolcatalog", "mcpserver", _("add streamable-HTTP servers; a server's agents, timeouts, enabled (what a stdio server runs: superusers only)"), _("delete servers")),
    (_("Skills"), "skills_registry", "skillresource", _("sync, import, enable/disable, subagent access"), ""),
    (_("API tokens"), "runtime", "apitoken", _("rename, revoke, rotate; issue tokens (for another staff account: superusers only)"), ""),
    (_("Users"), "auth", "user", _("edit accounts (rights, groups and superusers' accounts: superusers only)"), _("delete accounts")),
    (_("Audit log"), "audit", "auditentry", "", ""),
)


#: Rights that amount to directing a secret, apart from the areas: shown in their own column.
DIRECTS_KEYS = "runtime.direct_model_keys"

#: What only a superuser may do, whatever permissions an account holds (docs/security.md).
SUPERUSER_ONLY = (
    _("give rights: superuser status, an account's groups and permissions, any change of a group"),
    _("change a superuser's account or password"),
    _("issue or rotate a token for another staff account"),
    _("add or change what a stdio MCP server runs (command, arguments, environment, paths, network)"),
    _("point a model at a loopback, private or link-local address"),
)


def _level(perms: set[str], app: str, model: str) -> str:
    """``view`` / ``change`` (add or change) / with ``, delete`` / ``""`` for one area. Delete
    counts only with view or change, as the admin and the session rule count it."""

    def can(action: str) -> bool:
        return f"{app}.{action}_{model}" in perms

    base = "change" if can("change") or can("add") else "view" if can("view") else ""
    return f"{base}, delete" if base and can("delete") else base


def _level_label(level: str) -> str:
    labels = {"view": gettext("view"), "change": gettext("change"), "view, delete": gettext("view, delete"), "change, delete": gettext("change, delete")}
    return labels.get(level, level)


def staff_roles() -> list[dict]:
    """Every active staff account with its level per area and its role in a word: four queries
    whatever the number of accounts (the accounts, their permissions, their groups' permissions)."""
    users = list(
        get_user_model()
        .objects.filter(is_active=True, is_staff=True)
        .only("id", "username", "is_superuser", "last_login")
        .prefetch_related(Prefetch("groups", queryset=Group.objects.only("id", "name")))
        .order_by("username")
    )
    ids = [u.pk for u in users]
    direct: dict[int, set[str]] = defaultdict(set)
    through = get_user_model().user_permissions.through
    for user_id, app, codename in through.objects.filter(user_id__in=ids).values_list(
        "user_id", "permission__content_type__app_label", "permission__codename"
    ):
        direct[user_id].add(f"{app}.{codename}")
    group_ids = {g.pk for u in users for g in u.groups.all()}
    by_group: dict[int, set[str]] = defaultdict(set)
    for group_id, app, codename in Permission.group_set.through.objects.filter(group_id__in=group_ids).values_list(
        "group_id", "permission__content_type__app_label", "permission__codename"
    ):
        by_group[group_id].add(f"{app}.{codename}")
    rows = []
    for user in users:
        perms = set(direct[user.pk])
        for group in user.groups.all():
            perms |= by_group[group.pk]
        directs = user.is_superuser or DIRECTS_KEYS in perms
        if user.is_superuser:
            levels = {area: gettext("all") for area, *_rest in AREAS}
            role = "superuser"
        else:
            levels = {area: _level(perms, app, model) for area, app, model, *_rest in AREAS}
            granted = [level for level in levels.values() if level]
            if not granted:
                role = gettext("no console rights")
            elif all(level == "view" for level in granted):
                role = "view-only"
            else:
                role = gettext("can change: %(areas)s") % {"areas": ", ".join(str(area) for area, level in levels.items() if level not in ("", "view"))}
            if directs:
                role += " · " + gettext("directs API keys")
        rows.append(
            {"user": user, "groups": [g.name for g in user.groups.all()], "levels": [_level_label(levels[a]) for a, *_rest in AREAS], "role": role, "directs_keys": directs}
        )
    return rows


def agent_access_rows() -> list[dict]:
    agents = Agent.objects.only("id", "name", "enabled", "access_restricted").prefetch_related(
        Prefetch("allowed_users", queryset=get_user_model().objects.only("id", "username")),
        Prefetch("allowed_groups", queryset=Group.objects.only("id", "name")),
    )
    return [
        {
            "agent": agent,
            "users": sorted(u.username for u in agent.allowed_users.all()),
            "groups": sorted(g.name for g in agent.allowed_groups.all()),
        }
        for agent in agents.order_by("name")
    ]


@require_safe  # a page to read: the edits are on the agent's and the user's pages
def access_page(request):
    context = {
        **admin.site.each_context(request),
        "title": gettext("Access"),
        "subtitle": None,
        "agents": agent_access_rows(),
        "staff": staff_roles(),
        "areas": AREAS,
        "superuser_only": SUPERUSER_ONLY,
        "can_change_agents": request.user.has_perm("runtime.change_agent"),
        "can_view_users": request.user.has_perm("auth.view_user"),
    }
    return TemplateResponse(request, "console/access.html", context)
