"""A user's custom instructions (their chat page settings): added to the system prompt of
every run in their sessions, after the agent's own prompt (runtime/agents/system_prompt.py;
docs/chat.md, "Settings")."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext as _

from infra.prepared import P, Prepared
from runtime.errors import RuntimeInputError
from runtime.models import UserSettings

# Read for every run (its system prompt): compiled once, not built by the ORM each time.
_INSTRUCTIONS = Prepared(lambda: UserSettings.objects.filter(user_id=P("user")).order_by("pk").values_list("custom_instructions", flat=True)[:1])


def instructions_for(user_id: int | None) -> str:
    """The custom instructions of the user ``user_id`` ("" without any)."""
    if not user_id:
        return ""
    return _INSTRUCTIONS.first(user=user_id) or ""


def language_for(user_id: int | None) -> str:
    """The language the user chose for pages and messages ("": the browser's)."""
    if not user_id:
        return ""
    return UserSettings.objects.filter(user_id=user_id).values_list("language", flat=True).first() or ""


def settings_data(user) -> dict:
    row = UserSettings.objects.filter(user_id=user.pk).values("custom_instructions", "language").first() or {}
    return {
        "customInstructions": row.get("custom_instructions", ""),
        "maxCustomInstructions": UserSettings.MAX_INSTRUCTIONS,
        "language": row.get("language", ""),
        "languages": [{"code": code, "name": name} for code, name in settings.LANGUAGES],
    }


def user_language_update(user, *, language: str) -> UserSettings:
    """Set the user's language ("" for the browser's); the caller sets the cookie too
    (runtime/pages/language.py)."""
    if language not in {"", *(code for code, _name in settings.LANGUAGES)}:
        raise RuntimeInputError("language", _("must be one of: %(codes)s") % {"codes": ", ".join(code for code, _name in settings.LANGUAGES)})
    row, _created = UserSettings.objects.update_or_create(user=user, defaults={"language": language})
    return row


def user_settings_update(user, *, custom_instructions: str) -> UserSettings:
    if not isinstance(custom_instructions, str) or len(custom_instructions) > UserSettings.MAX_INSTRUCTIONS:
        raise RuntimeInputError("customInstructions", _("must be text of at most %(max)d characters") % {"max": UserSettings.MAX_INSTRUCTIONS})
    row, _created = UserSettings.objects.update_or_create(user=user, defaults={"custom_instructions": custom_instructions.strip()})
    return row
