"""The login forms (``/login/``, ``/admin/login/``) limit failed attempts per
username and per client address: through the real forms,
with CSRF checks on."""

from __future__ import annotations

import os
import uuid

import pytest
from django.test import Client

from tests.support.services import require

FORMS = ["/login/", "/admin/login/"]
REDIS_URL = os.environ.get("NETA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{10 + os.getpid() % 6}")


@pytest.fixture(autouse=True)
def limits(settings):
    """Fresh counts for each test: a cache of its own (never a shared one cleared)."""
    settings.NETA_LOGIN_MAX_FAILURES = 5
    settings.NETA_LOGIN_MAX_FAILURES_PER_IP = 8
    settings.NETA_LOGIN_WINDOW_SECONDS = 900
    settings.NETA_TRUSTED_PROXIES = 0
    settings.CACHES = {
        **settings.CACHES,
        "login": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": f"login-{uuid.uuid4()}"},
    }


def browser(address: str = "10.0.0.1") -> Client:
    return Client(enforce_csrf_checks=True, REMOTE_ADDR=address)


def sign_in(client: Client, form: str, username: str, password: str, **extra):
    page = client.get(form, **extra)
    assert page.status_code == 200
    token = client.cookies["csrftoken"].value
    return client.post(form, {"username": username, "password": password, "csrfmiddlewaretoken": token}, **extra)


@pytest.mark.parametrize("form", FORMS)
def test_five_failures_lock_the_username_with_429_and_retry_after(staff, form):
    client = browser()
    for _ in range(5):
        response = sign_in(client, form, "staff", "wrong")
        assert response.status_code == 200  # the form, with its error
    locked = sign_in(client, form, "staff", "pw-staff")  # even the right password
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 900
    assert b"Too many failed sign-in attempts" in locked.content and b"15 minutes" in locked.content
    assert "_auth_user_id" not in client.session
    # From another address too: the username is locked, not only the address.
    assert sign_in(browser("10.0.0.2"), form, "staff", "pw-staff").status_code == 429
    # Another account from the first address is not locked yet.
    assert sign_in(client, form, "someone-else", "x").status_code == 200


@pytest.mark.parametrize("form", FORMS)
def test_an_address_is_limited_across_usernames(staff, form):
    client = browser("10.0.0.9")
    for i in range(8):
        assert sign_in(client, form, f"user{i}", "wrong").status_code == 200
    response = sign_in(client, form, "staff", "pw-staff")
    assert response.status_code == 429 and response["Retry-After"]
    # The account itself is fine from elsewhere.
    assert sign_in(browser("10.0.0.10"), form, "staff", "pw-staff").status_code == 302


def test_the_limit_is_shared_by_both_forms_and_usernames_are_case_blind(staff):
    client = browser()
    for form in ["/login/", "/admin/login/", "/login/", "/admin/login/"]:
        assert sign_in(client, form, "Staff", "wrong").status_code == 200
    assert sign_in(client, "/login/", "STAFF ", "wrong").status_code == 200
    assert sign_in(client, "/admin/login/", "staff", "pw-staff").status_code == 429


@pytest.mark.parametrize("variant", ["ｓｔａｆｆ", "Ｓtaff", "staﬀ"])
def test_compatibility_forms_of_a_username_share_its_count(staff, variant):
    """The form signs in NFKC's form of the name (Django's UsernameField): fullwidth
    letters or a ligature are the same account, so they must not get fresh counts."""
    client = browser()
    for _ in range(5):
        assert sign_in(client, "/login/", "staff", "wrong").status_code == 200
    assert sign_in(browser("10.0.0.2"), "/login/", variant, "pw-staff").status_code == 429
    assert sign_in(browser("10.0.0.3"), "/admin/login/", variant, "pw-staff").status_code == 429


def test_a_success_clears_the_usernames_count(owner):
    client = browser()
    for _ in range(4):
        assert sign_in(client, "/login/", "owner", "wrong").status_code == 200
    assert sign_in(client, "/login/", "owner", "pw-owner").status_code == 302
    # Four more from another address (the first one's count stays: 4 of 8).
    other = browser("10.0.0.3")
    for _ in range(4):
        assert sign_in(other, "/login/", "owner", "wrong").status_code == 200
    assert sign_in(other, "/login/", "owner", "pw-owner").status_code == 302


def test_the_window_ends(owner, settings):
    settings.NETA_LOGIN_WINDOW_SECONDS = 1
    client = browser()
    for _ in range(5):
        sign_in(client, "/login/", "owner", "wrong")
    assert sign_in(client, "/login/", "owner", "pw-owner").status_code == 429
    import time

    time.sleep(1.2)  # the cache entry expires (a window of one second)
    assert sign_in(client, "/login/", "owner", "pw-owner").status_code == 302


def test_csrf_failures_are_not_counted_and_still_refused(owner):
    client = browser()
    for _ in range(10):
        response = client.post("/login/", {"username": "owner", "password": "wrong"})
        assert response.status_code == 403
    assert sign_in(client, "/login/", "owner", "pw-owner").status_code == 302


def test_trusted_proxies_name_the_client(owner, settings):
    settings.NETA_TRUSTED_PROXIES = 1
    settings.NETA_LOGIN_MAX_FAILURES_PER_IP = 3
    proxy = browser("127.0.0.1")
    for i in range(3):
        assert sign_in(proxy, "/login/", f"u{i}", "x", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 200
    assert sign_in(proxy, "/login/", "u9", "x", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 429
    # Another client behind the same proxy is not blocked; a forged left-most entry changes nothing.
    assert sign_in(proxy, "/login/", "owner", "pw-owner", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7").status_code == 302


def test_counts_live_in_redis_when_configured(owner, settings):
    """With NETA_REDIS_URL the counts are in Redis, so every web process sees them."""
    import redis

    try:
        reachable = bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping())
    except redis.RedisError:
        reachable = False
    require(reachable, f"Redis not reachable at {REDIS_URL}")
    prefix = f"neta-test-{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        **settings.CACHES,
        "login": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": prefix},
    }
    raw = redis.Redis.from_url(REDIS_URL)
    try:
        client = browser()
        for _ in range(5):
            assert sign_in(client, "/login/", "owner", "wrong").status_code == 200
        stored = [key.decode() for key in raw.scan_iter(match=f"{prefix}:*")]
        assert any(":neta-login:user:" in key for key in stored), stored
        # A second "process": a new client and a fresh cache connection see the same count.
        from django.core.cache import caches

        caches["login"].close()
        assert sign_in(browser(), "/login/", "owner", "pw-owner").status_code == 429
    finally:
        keys = list(raw.scan_iter(match=f"{prefix}:*"))
        if keys:
            raw.delete(*keys)
