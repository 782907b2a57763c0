"""A user's custom instructions (their chat page settings): added to the system prompt of
every run in their sessions, after the agent's own prompt (runtime/agents/system_prompt.py;
docs/chat.md, "Settings")."""

from __future__ import annotations

from runtime.errors import RuntimeInputError
from runtime.models import UserSettings


def instructions_for(user_id: int | None) -> str:
    """The custom instructions of the user ``user_id`` ("" without any)."""
    if not user_id:
        return ""
    return UserSettings.objects.filter(user_id=user_id).values_list("custom_instructions", flat=True).first() or ""


def settings_data(user) -> dict:
    return {"customInstructions": instructions_for(user.pk), "maxCustomInstructions": UserSettings.MAX_INSTRUCTIONS}


def user_settings_update(user, *, custom_instructions: str) -> UserSettings:
    if not isinstance(custom_instructions, str) or len(custom_instructions) > UserSettings.MAX_INSTRUCTIONS:
        raise RuntimeInputError("customInstructions", f"must be text of at most {UserSettings.MAX_INSTRUCTIONS} characters")
    row, _ = UserSettings.objects.update_or_create(user=user, defaults={"custom_instructions": custom_instructions.strip()})
    return row
