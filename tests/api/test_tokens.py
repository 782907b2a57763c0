"""Integration tokens (hashed at rest, shown once, scoped, expiring, revocable,
last-used) and browser sessions with CSRF."""

from __future__ import annotations

import datetime as dt
import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from runtime.api.tokens import api_token_create, api_token_revoke
from runtime.models import ApiToken


def token_client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_token_create_prints_the_token_once_and_stores_only_a_digest(owner):
    out, err = io.StringIO(), io.StringIO()
    call_command("token_create", "owner", "--read-only", "--days", "3", "--name", "ci", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert secret.startswith("neta_") and len(secret) > 40 and "\n" not in secret
    assert "shown only now" in err.getvalue() and secret not in err.getvalue()
    token = ApiToken.objects.get()
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert token.prefix == secret[:12] and token.name == "ci" and token.read_only
    assert dt.timedelta(days=2, hours=23) < token.expires_at - timezone.now() <= dt.timedelta(days=3)
    # Nothing stored can be turned back into the token.
    stored = " ".join(str(getattr(token, f.attname)) for f in ApiToken._meta.concrete_fields)
    assert secret not in stored and secret[12:] not in stored
    assert token_client(secret).get("/api/me/").json() == {
        "username": "owner", "isStaff": False, "auth": "token", "tokenScope": "read",
    }  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [(["nobody"], "no user named 'nobody'"), (["owner", "--days", "0"], "days: must be a whole number"), (["owner", "--days", "4000"], "days")],
)
def test_token_create_refuses_bad_input(owner, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("token_create", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.exists()


def test_last_used_is_recorded_at_most_once_a_minute(owner):
    issued = api_token_create(user=owner)
    assert issued.token.last_used_at is None
    client = token_client(issued.secret)
    assert client.get("/api/me/").status_code == 200
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    assert client.get("/api/me/").status_code == 200
    assert ApiToken.objects.get().last_used_at == first
    ApiToken.objects.update(last_used_at=first - dt.timedelta(minutes=2))
    assert client.get("/api/me/").status_code == 200
    assert ApiToken.objects.get().last_used_at > first - dt.timedelta(seconds=1)


@pytest.mark.parametrize(
    "header, message",
    [
        ("Token", "malformed Authorization header"),
        ("Token a b", "malformed Authorization header"),
        ("Token neta_notarealtoken", "unknown token"),
        ("Bearer something", "malformed token"),
    ],
)
def test_bad_tokens_are_refused_with_a_reason(owner, header, message):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/me/")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "authentication_failed" and error["message"].startswith(message)


def test_revoked_expired_and_inactive_tokens_stop_working(owner, outsider):
    revoked, expired, inactive = api_token_create(user=owner), api_token_create(user=owner, days=1), api_token_create(user=outsider)
    for issued in (revoked, expired, inactive):
        assert token_client(issued.secret).get("/api/me/").status_code == 200
    api_token_revoke(token=revoked.token)
    first_revocation = ApiToken.objects.get(pk=revoked.token.pk).revoked_at
    api_token_revoke(token=revoked.token)
    assert ApiToken.objects.get(pk=revoked.token.pk).revoked_at == first_revocation
    ApiToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    outsider.is_active = False
    outsider.save()
    for issued, reason in ((revoked, "token revoked"), (expired, "token expired"), (inactive, "user inactive")):
        response = token_client(issued.secret).get("/api/me/")
        assert response.status_code == 401 and response.json()["error"]["message"] == reason


def test_a_read_only_token_reads_but_never_writes(owner, agent):
    issued = api_token_create(user=owner, read_only=True)
    client = token_client(issued.secret)
    assert client.get("/api/sessions/").status_code == 200
    response = client.post("/api/sessions/", {})
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    from sessions_tree.models import AgentSession

    assert not AgentSession.objects.exists()


def test_admin_creates_a_token_shows_it_once_and_revokes_it(staff, owner):
    admin = APIClient()
    admin.force_login(staff)
    response = admin.post(
        "/admin/runtime/apitoken/add/", {"user": owner.pk, "name": "deploy", "scope": "read_write", "days": "7"}, format="multipart", follow=True
    )
    assert response.status_code == 200
    token = ApiToken.objects.get()
    assert token.created_by == staff and token.expires_at is not None
    page = response.content.decode()
    start = page.index(token.prefix)
    secret = page[start : page.index("</code>", start)]
    assert hashlib.sha256(secret.encode()).hexdigest() == token.digest
    assert token_client(secret).get("/api/me/").json()["username"] == "owner"
    # The change page never shows it again.
    change = admin.get(f"/admin/runtime/apitoken/{token.pk}/change/").content.decode()
    assert secret not in change and token.prefix in change
    admin.post("/admin/runtime/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}, format="multipart")
    assert ApiToken.objects.get().revoked_at is not None
    assert token_client(secret).get("/api/me/").status_code == 401


def test_browser_sessions_need_the_csrf_token_for_writes(owner, agent):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(owner)
    assert browser.get("/api/sessions/").status_code == 200  # reads need no token
    refused = browser.post("/api/sessions/", {})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    csrf = browser.get("/api/csrf/").json()["csrfToken"]
    accepted = browser.post("/api/sessions/", {}, HTTP_X_CSRFTOKEN=csrf)
    assert accepted.status_code == 201, accepted.content


def test_token_requests_need_no_csrf_token(owner, agent):
    issued = api_token_create(user=owner)
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.secret}")
    assert client.post("/api/sessions/", {}).status_code == 201
