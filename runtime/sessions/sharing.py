"""The chat page's own session services: feedback on answers, read-only share links, pins,
and the Markdown export (docs/chat.md; docs/api.md, "Sessions").

Feedback is a Pi ``custom`` entry (customType ``neta.feedback``) in the tree: Pi and the
context builder skip ``custom`` entries, so it never reaches the model. A share link names
the active path's leaf when it was made (entries never change), so what it shows stays what
was shared; it works without login until revoked.
"""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from runtime.errors import RuntimeInputError
from runtime.models import SessionPin, SessionShare
from runtime.runs.selectors import active_run
from sessions_tree.acting import acting_as
from sessions_tree.errors import EntryNotFound, InvalidEntry, SessionBusy, SessionNotFound
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider, provider_for_session

FEEDBACK_TYPE = "neta.feedback"
FEEDBACK_RATINGS = ("up", "down")
MAX_FEEDBACK_NOTE = 1000
MAX_SHARES_PER_SESSION = 20


def session_feedback(*, session_id: str, entry_id: str, rating: str | None, note: str = "", actor) -> dict:
    """👍 (``up``) or 👎 (``down``) with an optional note on the answer ``entry_id``; ``rating``
    None takes it back. Returns the ``custom`` entry written at the leaf (folded in the tree).
    400 ``entryId`` when it is not an assistant message, ``rating``/``note`` when bad; 409
    while a run is active (the leaf is the answer being written)."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", _("must be an entry id"))
    if rating is not None and rating not in FEEDBACK_RATINGS:
        raise RuntimeInputError("rating", _("must be 'up', 'down' or null"))
    if not isinstance(note, str) or len(note) > MAX_FEEDBACK_NOTE:
        raise RuntimeInputError("note", _("must be a string of at most %(max_feedback_note)s characters") % {"max_feedback_note": MAX_FEEDBACK_NOTE})
    provider = provider_for_session(session_id)
    entry = provider.get_entry(session_id, entry_id)  # EntryNotFound: 400 naming entryId
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise RuntimeInputError("entryId", _("must be an assistant message (an answer)"))
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: give feedback when it ends")
    data = {"entryId": entry_id, "rating": rating, "note": note.strip()}
    if getattr(actor, "pk", None):
        data["by"] = actor.get_username()
    with acting_as(actor):
        return provider.append_custom_entry(session_id, custom_type=FEEDBACK_TYPE, data=data)


def feedback_of(entries) -> dict[str, dict]:
    """The feedback standing on each answer (``entryId`` → the latest data), from ``entries``."""
    out: dict[str, dict] = {}
    for entry in entries:
        if entry.get("type") == "custom" and entry.get("customType") == FEEDBACK_TYPE and isinstance(entry.get("data"), dict):
            data = entry["data"]
            if isinstance(data.get("entryId"), str):
                out[data["entryId"]] = {**data, "at": entry.get("timestamp")}
    return {k: v for k, v in out.items() if v.get("rating") in FEEDBACK_RATINGS}


# --------------------------------------------------------------------------- share links


def share_create(*, meta: AgentSession, actor) -> SessionShare:
    """A read-only link to ``meta``'s active path as it is now. 409 when the session holds
    nothing yet or a run is writing (its answer is not there to share)."""
    if not meta.leaf_entry_id:
        raise RuntimeInputError("session", _("the session is empty: nothing to share yet"))
    if active_run(meta.session_id) is not None:
        raise SessionBusy("a run is active: share the session when it ends")
    if SessionShare.objects.filter(session=meta, revoked_at__isnull=True).count() >= MAX_SHARES_PER_SESSION:
        raise RuntimeInputError("session", _("at most %(max_shares_per_session)s live share links a session: revoke one first") % {"max_shares_per_session": MAX_SHARES_PER_SESSION})
    return SessionShare.objects.create(
        token=secrets.token_urlsafe(24), session=meta, leaf_entry_id=meta.leaf_entry_id, title=meta.title or "",
        created_by=actor if getattr(actor, "pk", None) else None,
    )  # fmt: skip


def share_revoke(share: SessionShare) -> SessionShare:
    if share.revoked_at is None:
        share.revoked_at = timezone.now()
        share.save(update_fields=["revoked_at"])
    return share


def shared_path(token: str) -> tuple[SessionShare, list[dict]] | None:
    """The live share ``token`` and the entries of its path (root → its leaf), or None."""
    share = SessionShare.objects.select_related("session").filter(token=token, revoked_at__isnull=True).first()
    if share is None or not isinstance(token, str):
        return None
    meta = share.session
    provider = get_provider(meta.provider)
    try:
        path = provider.get_active_path(meta.session_id, share.leaf_entry_id)
    except (SessionNotFound, EntryNotFound, InvalidEntry, OSError):  # the session's file went, or the entry
        return None
    SessionShare.objects.filter(pk=share.pk).update(views=F("views") + 1)
    return share, path


def share_row(share: SessionShare) -> dict:
    return {
        "id": share.pk, "url": f"/share/{share.token}/", "title": share.title, "leafEntryId": share.leaf_entry_id,
        "createdAt": share.created_at.isoformat(), "revokedAt": share.revoked_at.isoformat() if share.revoked_at else None,
        "views": share.views,
    }  # fmt: skip


# --------------------------------------------------------------------------- pins


def pin_set(*, meta: AgentSession, user, pinned: bool) -> bool:
    """Pin (or unpin) ``meta`` in ``user``'s session list; returns whether it is pinned."""
    if pinned:
        try:
            with transaction.atomic():
                SessionPin.objects.get_or_create(user=user, session=meta)
        except IntegrityError:
            pass  # pinned by a second tab meanwhile
        return True
    SessionPin.objects.filter(user=user, session=meta).delete()
    return False


def pinned_ids(user, session_pks) -> set[int]:
    return set(SessionPin.objects.filter(user=user, session_id__in=list(session_pks)).values_list("session_id", flat=True))


def run_feedback(run) -> list[dict]:
    """The feedback standing on the answers ``run`` wrote (the console's run page): the
    assistant entries below its prompt entry, up to the next user message."""
    if not run.prompt_entry_id:
        return []
    try:
        entries = provider_for_session(run.session_id).list_entries(run.session_id)
    except (SessionNotFound, OSError):
        return []
    given = feedback_of(entries)
    if not given:
        return []
    children: dict[str, list[dict]] = {}
    for entry in entries:
        children.setdefault(entry.get("parentId"), []).append(entry)
    answers, stack = set(), [run.prompt_entry_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            message = child.get("message") if child.get("type") == "message" else None
            if isinstance(message, dict) and message.get("role") == "user":
                continue  # the next prompt: another run's answers
            if isinstance(message, dict) and message.get("role") == "assistant":
                answers.add(child["id"])
            stack.append(child["id"])
    return [given[a] for a in answers if a in given]
