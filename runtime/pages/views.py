"""Pages for people: the chat page (``/``, ``/sessions/<id>/``) and its login.

The page is a shell: the session itself arrives over the websocket (subscribe
first, snapshot second). What the shell embeds is small and needed before the
socket answers: who is logged in, the session id, the agent (its model, its
branch-summary setting) and the agent's recent sessions.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils.translation import gettext as _
from django.views.decorators.csrf import ensure_csrf_cookie

from runtime.agents.access import agent_usable_by, usable_agents
from runtime.agents.selectors import agent_for_session, default_agent
from runtime.errors import RuntimeInputError
from runtime.models import Agent, ModelConfig, SessionPin
from runtime.sessions.sharing import shared_path
from runtime.sessions.access import Access, session_access
from runtime.sessions.services import session_for_agent
from sessions_tree.models import AgentSession
from toolcatalog.sandbox import effective_sandbox

LOGIN_URL = reverse_lazy("pages:login")
RECENT_SESSIONS = 50


def model_data(model: ModelConfig) -> dict:
    return {
        "name": model.name,
        "displayName": model.display_name or model.name,
        "modelId": model.model_id,
        "contextWindow": model.context_window,
        "supportsTools": model.supports_tools,
        "supportsImages": model.supports_images,
        "supportsThinking": model.supports_thinking,
    }


def usable_models(agent: Agent) -> list[dict]:
    """The models the composer offers for the next prompt: the enabled ones with their key
    set (the prompt service checks again), the agent's own first."""
    models = [m for m in ModelConfig.objects.filter(enabled=True).order_by("name") if m.usable]
    models.sort(key=lambda m: m.pk != agent.model_id)
    return [model_data(m) for m in models]


def agent_data(agent: Agent) -> dict:

    model = agent.model
    return {
        "name": agent.name,
        "description": agent.description,
        "workspaceMode": agent.workspace_mode,
        "sandbox": effective_sandbox().to_dict(),  # the mode bash commands run in, and why
        "summarizeOnSwitch": agent.summarize_on_switch,
        "restoreLastSession": agent.restore_last_session,
        "thinkingLevel": agent.thinking_level,
        "model": {
            "name": model.name,
            "displayName": model.display_name or model.name,
            "modelId": model.model_id,
            "contextWindow": model.context_window,
            "supportsImages": model.supports_images,
            "supportsThinking": model.supports_thinking,
        },
    }


def session_row(meta: AgentSession, pinned: set | frozenset = frozenset()) -> dict:
    return {
        "sessionId": meta.session_id,
        "title": meta.title,
        "agent": meta.agent,
        "pinned": meta.pk in pinned,
        "status": meta.status,
        "entryCount": meta.entry_count,
        "messageCount": meta.message_count,
        "updatedAt": meta.updated_at.isoformat(),
    }


def visible_session(user, session_id: str) -> tuple[AgentSession, Access]:
    """The session and what ``user`` may do with it (``runtime.sessions.access.session_access``)."""
    meta = AgentSession.objects.filter(session_id=session_id).first()
    access = session_access(user, meta)
    if not access.read:
        raise Http404(_("no such session"))  # another user's session looks like a missing one
    return meta, access


@login_required(login_url=LOGIN_URL)
@ensure_csrf_cookie
def chat_page(request, session_id: str | None = None):
    """The chat page. Without a session id: the agent's last session when it restores
    sessions (``Agent.restore_last_session``), else a new one. ``?new=1`` ("New session")
    is a draft: no session exists until the first message is sent (the page creates it
    then), so trying a new session and leaving leaves nothing behind."""
    meta = None
    if session_id is None:
        wanted = request.GET.get("agent")
        mine = usable_agents(request.user, Agent.objects.select_related("model"))  # runtime/agents/access.py
        agent = mine.filter(name=wanted).first() if wanted else None
        if wanted and agent is None:
            raise Http404(_("no such agent"))  # one the user may not use looks like a missing one
        try:
            agent = agent or default_agent(for_user=request.user)
        except RuntimeInputError as exc:
            raise PermissionDenied(str(exc)) from None
        if request.GET.get("new") == "1":
            return _draft_page(request, agent)
        meta = session_for_agent(agent=agent, user=request.user)
        access = session_access(request.user, meta)
    else:
        meta, access = visible_session(request.user, session_id)
        agent = agent_for_session(meta)
        if meta.user_id == request.user.pk and not agent_usable_by(agent, request.user):
            raise PermissionDenied(_("you may not use the agent “%(agent)s”") % {"agent": agent.name})
    data = page_data(request, agent, meta)
    data["readOnly"] = not access.write  # another user's session the viewer may read but not change (the socket says so too)
    # A session nobody wrote in yet is a fresh one ("New session"), not an "Untitled" one.
    title = meta.title or (_("Untitled session") if meta.message_count else _("New session"))
    return render(request, "chat/index.html", {"data": data, "title": title})


def _draft_page(request, agent: Agent):
    data = page_data(request, agent, None)
    return render(request, "chat/index.html", {"data": data, "title": _("New session")})


def page_data(request, agent: Agent, meta: AgentSession | None) -> dict:
    """What the page embeds; ``meta`` None: a draft (``sessionId`` null, no socket)."""
    recent = list(AgentSession.objects.filter(user=request.user, agent=agent.name, status="active").order_by("-updated_at")[:RECENT_SESSIONS])
    agents = usable_agents(request.user, Agent.objects.select_related("model")).order_by("name")
    # Pinned sessions head the list whatever their agent and age.
    pins = list(
        AgentSession.objects.filter(pk__in=SessionPin.objects.filter(user=request.user).values("session_id"), status="active").order_by("-updated_at")[:RECENT_SESSIONS]
    )
    pinned = {p.pk for p in pins}
    return {
        "user": {"username": request.user.get_username(), "isStaff": request.user.is_staff},
        "sessionId": meta.session_id if meta else None,
        "session": session_row(meta, pinned) if meta else None,
        "readOnly": False,
        "agent": agent_data(agent),
        "models": usable_models(agent),
        "agents": [{"name": a.name, "description": a.description, "restoreLastSession": a.restore_last_session} for a in agents],
        # Sessions nobody wrote in are not listed (the one open now is, as "current").
        "sessions": [
            session_row(s, pinned) for s in recent if s.message_count or s.title or (meta is not None and s.pk == meta.pk)
        ],
        "pinned": [session_row(s, pinned) for s in pins],
        "urls": {
            "socket": f"/ws/sessions/{meta.session_id}/" if meta else None,
            "api": "/api/",
            "page": reverse("pages:session", args=[meta.session_id]) if meta else None,
            "home": reverse("pages:chat"),
            "logout": reverse("pages:logout"),
            "console": reverse("admin:index") if request.user.is_staff else None,
            "language": reverse("pages:set_language"),
        },
        # The switcher in Settings (runtime/pages/language.py); the page's own words come
        # with it in the request's language ({% chat_i18n %}).
        "languages": [{"code": code, "name": name} for code, name in settings.LANGUAGES],
        "heartbeatSeconds": settings.NETA_WS_HEARTBEAT_SECONDS,
    }


def share_page(request, token: str):
    """A read-only share link (``/share/<token>/``): the shared path without login, or 404
    when the link is unknown or revoked. No socket: the entries come with the page."""
    found = shared_path(token)
    if found is None:
        raise Http404(_("no such link (it may have been revoked)"))
    share, path = found
    meta = share.session
    data = {
        "share": {
            "title": share.title or meta.title or _("Shared conversation"),
            "agent": meta.agent,
            "sharedAt": share.created_at.isoformat(),
            "entries": path,
        },
        "user": {"username": "", "isStaff": False},
    }
    response = render(request, "chat/share.html", {"data": data, "title": data["share"]["title"]})
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    return response


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#3b5bdb"/></svg>'
)


def favicon(request):
    response = HttpResponse(FAVICON, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


class LoginView(auth_views.LoginView):
    template_name = "chat/login.html"
    redirect_authenticated_user = True
    next_page = reverse_lazy("pages:chat")  # without ?next= (every "Sign out" lands here): the chat page


class LogoutView(auth_views.LogoutView):
    next_page = LOGIN_URL
