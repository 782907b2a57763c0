"""Session access is structural: every API route that names a session checks the caller's
access before its handler runs, whoever writes the next view."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from runtime.api.views.base import SessionApi
from runtime.api.views.sessions import SessionViewSet


def routes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.callback


def test_every_route_with_a_session_id_checks_access_before_its_handler():
    checked = []
    for route, callback in routes(get_resolver().url_patterns):
        if "session_id" not in route or not route.startswith("api/"):
            continue
        view = getattr(callback, "cls", None)
        assert view is not None, f"{route}: not a DRF view"
        assert issubclass(view, SessionApi) or issubclass(view, SessionViewSet), (
            f"{route}: {view.__name__} is neither a SessionApi (its initial() checks access) nor the session viewset"
        )
        if issubclass(view, SessionApi):
            assert "initial" not in vars(view), f"{view.__name__} overrides initial(): the check must stay first"
            assert not hasattr(view, "session"), f"{view.__name__}: a handler reads self.meta, found by initial()"
        checked.append(route)
    assert len(checked) >= 20, checked  # the routes are there to check


@pytest.mark.django_db
def test_a_handler_sees_the_session_already_checked(client, django_user_model, tmp_path, settings):
    """The check runs before the handler: an outsider's request is 404 whatever the body."""
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    from runtime.models import Agent, ModelConfig
    from runtime.sessions.services import session_start

    owner = django_user_model.objects.create_user("owner", password="pw")
    outsider = django_user_model.objects.create_user("outsider", password="pw")
    model = ModelConfig.objects.create(name="m", provider_kind="scripted", model_id="s")
    Agent.objects.create(name="default", model=model)
    session_id = session_start(agent=Agent.objects.get(name="default"), user=owner).session_id
    client.force_login(outsider)
    for method, path in (("post", "prompt/"), ("post", "labels/"), ("get", "snapshot/"), ("put", "pin/"), ("post", "shares/")):
        answer = client.generic(method.upper(), f"/api/sessions/{session_id}/{path}", data="not json", content_type="application/json")
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "session_not_found", (path, answer.content)
