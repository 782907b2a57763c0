"""The reader's language (docs/development.md, "Translations").

Django's ``LocaleMiddleware`` picks the language of a request: the language cookie, else
the browser's ``Accept-Language``, else English. A user's own setting
(``UserSettings.language``) is what that cookie holds for them: it is written at each
sign-in and each change, on the chat page and in the console, so the setting wins over the
browser on every device the user signs in on. A user without a setting has no cookie and
reads the browser's language.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.http import HttpResponseRedirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from runtime.agents.instructions import language_for, user_language_update
from runtime.errors import RuntimeInputError


def set_language_cookie(response, language: str) -> None:
    """The cookie ``LocaleMiddleware`` reads; ``""`` removes it (back to the browser's language)."""
    if language:
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME, language,
            max_age=settings.LANGUAGE_COOKIE_AGE, path=settings.LANGUAGE_COOKIE_PATH,
            domain=settings.LANGUAGE_COOKIE_DOMAIN, secure=settings.LANGUAGE_COOKIE_SECURE,
            httponly=settings.LANGUAGE_COOKIE_HTTPONLY, samesite=settings.LANGUAGE_COOKIE_SAMESITE,
        )  # fmt: skip
    else:
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME, path=settings.LANGUAGE_COOKIE_PATH, domain=settings.LANGUAGE_COOKIE_DOMAIN)


def remember_language(view):
    """Wrap a login view: a sign-in that succeeds carries the user's language setting into
    the cookie (nothing changes for a user without one)."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if request.method == "POST" and request.user.is_authenticated and 300 <= response.status_code < 400:
            language = language_for(request.user.pk)
            if language:
                set_language_cookie(response, language)
        return response

    return wrapper


@require_POST
def set_language(request):
    """The switcher's form (chat page and console): ``language`` (a code of ``LANGUAGES``, or
    ``""`` for the browser's) and ``next``. A signed-in user's setting is saved too."""
    language = request.POST.get("language", "")
    next_url = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        next_url = "/"
    if language and not translation.check_for_language(language):
        language = None
    response = HttpResponseRedirect(next_url)
    if language is None:
        return response  # an unknown code changes nothing
    if request.user.is_authenticated:
        try:
            user_language_update(request.user, language=language)
        except RuntimeInputError:
            return response
    set_language_cookie(response, language)
    return response
