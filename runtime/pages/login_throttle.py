"""Failed sign-in limits for the two login forms (``/login/`` and ``/admin/login/``).

A failed attempt (the form comes back with errors) is counted twice: against the
username (NFKC-normalized as the form signs in, case-blind, hashed) and against the client address. Once either count
reaches its limit (``NETA_LOGIN_MAX_FAILURES`` per username,
``NETA_LOGIN_MAX_FAILURES_PER_IP`` per address) inside the window
(``NETA_LOGIN_WINDOW_SECONDS``, counted from the first failure), the form
answers 429 with a message and ``Retry-After`` and no password is checked
until the window ends. A successful sign-in clears its username's count. The
counts live in the ``login`` cache (Redis when ``NETA_REDIS_URL`` is set, so
every process shares them; process memory otherwise).

The client address is ``REMOTE_ADDR``; behind reverse proxies set
``NETA_TRUSTED_PROXIES`` to their number so the address the nearest trusted
proxy saw (``X-Forwarded-For``, counted from the right) is used instead.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
import unicodedata

from django.conf import settings
from django.core.cache import caches
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

PREFIX = "neta-login"


def client_ip(request) -> str:
    remote = request.META.get("REMOTE_ADDR") or "unknown"
    proxies = settings.NETA_TRUSTED_PROXIES
    if proxies <= 0:
        return remote
    chain = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    # The last `proxies` hops were added by our proxies; the one before them is the client.
    return chain[-proxies] if len(chain) >= proxies else remote


def _keys(request, username: str) -> list[tuple[str, int]]:
    # NFKC as Django's UsernameField signs in (fullwidth "ｂｏｂ" is "bob"), then case-blind.
    folded = unicodedata.normalize("NFKC", username).strip().casefold()
    name = hashlib.sha256(folded.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    address = hashlib.sha256(client_ip(request).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return [
        (f"{PREFIX}:user:{name}", settings.NETA_LOGIN_MAX_FAILURES),
        (f"{PREFIX}:ip:{address}", settings.NETA_LOGIN_MAX_FAILURES_PER_IP),
    ]


def blocked_for(request, username: str) -> int | None:
    """Seconds until this username and address may try again; None when they may now."""
    cache = caches["login"]
    now = time.time()
    waits = []
    for key, limit in _keys(request, username):
        count = cache.get(key) or 0
        if count >= limit:
            since = cache.get(key + ":since") or now
            waits.append(max(1, math.ceil(since + settings.NETA_LOGIN_WINDOW_SECONDS - now)))
    return max(waits) if waits else None


def record_failure(request, username: str) -> None:
    cache = caches["login"]
    window = settings.NETA_LOGIN_WINDOW_SECONDS
    for key, _limit in _keys(request, username):
        cache.add(key + ":since", time.time(), timeout=window)
        cache.add(key, 0, timeout=window)  # add, not set: a concurrent first failure keeps its count
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls: a new window
            cache.set(key, 1, timeout=window)


def clear_username(request, username: str) -> None:
    key, _limit = _keys(request, username)[0]
    caches["login"].delete_many([key, key + ":since"])


def _wait_text(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    if seconds >= 60:
        return ngettext("%(n)d minute", "%(n)d minutes", minutes) % {"n": minutes}
    return ngettext("%(n)d second", "%(n)d seconds", seconds) % {"n": seconds}


def throttled_login(view):
    """Wrap a login view (Django's ``LoginView`` or the admin's) with the limits above."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = request.POST.get("username", "")[:256]
        wait = blocked_for(request, username)
        if wait is not None:
            message = _("Too many failed sign-in attempts. Try again in %(wait)s.") % {"wait": _wait_text(wait)}
            response = render(request, "chat/login.html", {"throttled": message, "action": request.path}, status=429)
            response["Retry-After"] = str(wait)
            return response
        response = view(request, *args, **kwargs)
        if request.user.is_authenticated and 300 <= response.status_code < 400:
            clear_username(request, username)
        elif response.status_code == 200:  # the form came back: the credentials were refused
            record_failure(request, username)
        return response

    return wrapper
