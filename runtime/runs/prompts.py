"""Prompting and aborting: a prompt becomes a run (or a queued input of the active run)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from runtime.agents.access import check_agent_use
from runtime.agents.selectors import agent_for_session
from runtime.errors import RuntimeInputError, non_empty
from runtime.models import (
    AgentRun,
    ModelConfig,
    RunInputKind,
    RunStatus,
)
from runtime.runs import lifecycle
from runtime.runs.backends import cancel_local, submit_run
from runtime.runs.locks import lock_session, session_or_not_found
from runtime.runs.reaper import reap_session
from runtime.runs.selectors import active_run
from sessions_tree.acting import acting_as
from sessions_tree.errors import SessionBusy
from sessions_tree.models import AgentSession
from sessions_tree.providers import (
    get_provider,
)

MAX_PROMPT_CHARS = 200_000


MAX_IMAGES = 8


MAX_IMAGE_BASE64 = 10 * 1024 * 1024  # one image; all of them and the text must also fit one entry:


PROMPT_ENTRY_RESERVE = 64 * 1024  # what the user entry adds around text and images (ids, keys, timestamps)


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def max_prompt_bytes() -> int:
    """Text and images of one prompt together: they become one entry of at most NETA_MAX_ENTRY_BYTES."""
    return settings.NETA_MAX_ENTRY_BYTES - PROMPT_ENTRY_RESERVE


@dataclass
class PromptOutcome:
    run: AgentRun
    queued_as: str | None  # None: a new run; "follow_up"/"steer": delivered to the active run
    editor_text: str | None = None


def _clean_images(images, *, text: str = "") -> list[dict]:
    """The prompt's images, checked: at most 8, each at most 10 MB of base64, and all of
    them with the text at most ``max_prompt_bytes()`` (they are stored as one entry)."""
    if images in (None, []):
        return []
    if not isinstance(images, list) or len(images) > MAX_IMAGES:
        raise RuntimeInputError("images", f"must be a list of at most {MAX_IMAGES} images")
    out = []
    total = len(text.encode("utf-8", "surrogatepass"))
    limit = max_prompt_bytes()
    for i, image in enumerate(images):
        if not isinstance(image, dict) or not isinstance(image.get("data"), str) or image.get("mimeType") not in IMAGE_TYPES:
            raise RuntimeInputError(f"images[{i}]", f"needs base64 'data' and a 'mimeType' of {', '.join(IMAGE_TYPES)}")
        if len(image["data"]) > MAX_IMAGE_BASE64:
            raise RuntimeInputError(f"images[{i}]", "is larger than 10 MB")
        total += len(image["data"])  # base64 is ASCII: one byte a character
        if total > limit:
            raise RuntimeInputError(
                "images",
                f"text and images together are over {limit} bytes (one entry holds at most NETA_MAX_ENTRY_BYTES)",
            )
        out.append({"data": image["data"], "mimeType": image["mimeType"]})
    return out


def _clean_text(text) -> str:
    return non_empty("text", text, MAX_PROMPT_CHARS)


def session_prompt(
    *,
    session_id: str,
    text: str,
    actor,
    images=None,
    from_entry_id: str | None = None,
    mode: str = RunInputKind.FOLLOW_UP,
    model_name: str | None = None,
    dispatch: bool = True,
) -> PromptOutcome:
    """Send ``text`` to the session's agent.

    While a run is active the text is queued on it, as a follow-up (default) or
    to steer it. ``from_entry_id`` continues from a history node (Pi's ``/tree``
    rule): from a user message its parent becomes the leaf, from any other node
    that node.

    ``actor`` is who prompts (the owner, or staff on another user's session; None from
    the command line): the run records it (``AgentRun.user``), and the tree events the
    prompt and its run write name it (``SessionEvent.actor``).
    """

    text = _clean_text(text)
    images = _clean_images(images, text=text)
    if mode not in (RunInputKind.FOLLOW_UP, RunInputKind.STEER):
        raise RuntimeInputError("mode", "must be 'follow_up' or 'steer'")
    meta = session_or_not_found(session_id)
    agent = agent_for_session(meta)
    check_agent_use(agent, actor)  # 403 for a user the agent is not open to (a command may)
    run_user = actor if getattr(actor, "pk", None) else None
    if model_name and not ModelConfig.objects.filter(name=model_name, enabled=True).exists():
        raise RuntimeInputError("model", f"no enabled model named {model_name!r}")
    reap_session(session_id)
    # Continuing from another entry moves the leaf: that takes the store's write lock, which
    # comes before the row lock (the providers' order), so it is taken first here.
    store_lock = get_provider(meta.provider).write_lock(session_id) if from_entry_id else contextlib.nullcontext()
    with store_lock, transaction.atomic():
        # Serialized with session_delete on the row: if the session went meanwhile this is a
        # 404, and once the run below is committed a delete sees it and refuses.
        # The one lock of the decision (runs/locks.py): the session row. Under it the active
        # run read below stays the active run until this transaction ends.
        meta = lock_session(meta)
        current = active_run(session_id)
        if current is not None:
            if from_entry_id:
                raise SessionBusy("a run is active: abort it or wait before continuing from another entry")
            lifecycle.queue_input(current, kind=mode, text=text, images=images, user=run_user)
            return PromptOutcome(run=current, queued_as=mode)
        editor_text = None
        if from_entry_id:
            with acting_as(actor):
                editor_text = _continue_from(meta, from_entry_id)
        run = lifecycle.create_run(
            meta,
            agent=agent,
            user=run_user,
            prompt=text,
            images=images,
            from_entry_id=from_entry_id or "",
            model_name=model_name or "",
        )
        if dispatch:

            submit_run(run)
    return PromptOutcome(run=run, queued_as=None, editor_text=editor_text)


def _continue_from(meta: AgentSession, entry_id: str) -> str | None:
    """Move the leaf for a prompt from ``entry_id`` (the navigation switch-leaf uses); its editor text."""
    _, editor_text = get_provider(meta.provider).navigate(meta.session_id, entry_id)
    return editor_text


def run_abort(*, session_id: str | None = None, run: AgentRun | None = None, actor=None) -> AgentRun | None:
    """Ask the session's active run (or ``run``) to stop, on behalf of ``actor`` (who is
    recorded, and named in the run's error): a running run stops cooperatively, a run
    still queued is aborted at once (``lifecycle.abort``)."""

    outcome = lifecycle.abort(session_id=session_id, run=run, actor=actor)
    if outcome.run is not None and not outcome.stopped and outcome.run.status == RunStatus.RUNNING:
        cancel_local(outcome.run.run_id)  # wake it now if it runs in this process
    return outcome.run
