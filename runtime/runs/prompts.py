"""Prompting and aborting: a prompt becomes a run (or a queued input of the active run)."""

from __future__ import annotations

import binascii
import contextlib

import orjson
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from runtime.agents.access import check_agent_use
from runtime.agents.selectors import agent_for_session
from runtime.errors import RuntimeInputError, non_empty
from runtime.llm.spec import THINKING_LEVELS
from runtime.models import (
    AgentRun,
    ModelConfig,
    RunInput,
    RunInputKind,
    RunStatus,
)
from runtime.realtime.sinks import streaming_row
from runtime.runs import lifecycle
from runtime.runs.backends import cancel_local, first_submission, submit_run
from runtime.runs.documents import clean_documents
from runtime.runs.locks import lock_session, session_or_not_found
from runtime.runs.reaper import reap_session
from runtime.runs.selectors import active_run
from runtime.runs.turn import close_open_tool_calls
from sessions_tree.acting import acting_as
from sessions_tree.errors import SessionBusy
from sessions_tree.models import AgentSession
from sessions_tree.providers import (
    get_provider,
    provider_for_session,
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
        raise RuntimeInputError("images", _("must be a list of at most %(max_images)s images") % {"max_images": MAX_IMAGES})
    out = []
    total = len(text.encode("utf-8", "surrogatepass"))
    limit = max_prompt_bytes()
    for i, image in enumerate(images):
        if not isinstance(image, dict) or not isinstance(image.get("data"), str) or image.get("mimeType") not in IMAGE_TYPES:
            raise RuntimeInputError(f"images[{i}]", _("needs base64 'data' and a 'mimeType' of %(join_image_types)s") % {"join_image_types": ', '.join(IMAGE_TYPES)})
        if len(image["data"]) > MAX_IMAGE_BASE64:
            raise RuntimeInputError(f"images[{i}]", _("is larger than 10 MB"))
        try:
            binascii.a2b_base64(image["data"], strict_mode=True)
        except (binascii.Error, ValueError):
            raise RuntimeInputError(f"images[{i}]", _("'data' is not base64 (no whitespace or data URL prefix)")) from None
        total += len(image["data"])  # base64 is ASCII: one byte a character
        if total > limit:
            raise RuntimeInputError(
                "images",
                _("text and images together are over %(limit)s bytes (one entry holds at most NETA_MAX_ENTRY_BYTES)") % {"limit": limit},
            )
        out.append({"data": image["data"], "mimeType": image["mimeType"]})
    return out


def clean_images(images, *, text: str = "") -> list[dict]:
    """``_clean_images`` for callers that store images of their own (the OpenAI endpoints'
    history messages): the same limits as a prompt's."""
    return _clean_images(images, text=text)


MAX_INSTRUCTIONS_CHARS = 100_000


def _clean_instructions(instructions) -> str:
    if instructions in (None, ""):
        return ""
    if not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS_CHARS:
        raise RuntimeInputError("instructions", _("must be a string of at most %(max_instructions_chars)s characters") % {"max_instructions_chars": MAX_INSTRUCTIONS_CHARS})
    return instructions


def _clean_text(text) -> str:
    return non_empty("text", text, MAX_PROMPT_CHARS)


def _clean_model(model_name, *, agent, images: list, thinking_level) -> ModelConfig:
    """The model the run will use (``model_name``, else the agent's), checked against
    what the prompt asks of it: an enabled model with its key set, images only to a
    model that takes images, a thinking level other than ``off`` only to one that thinks."""
    model = agent.model
    if model_name:
        if not isinstance(model_name, str):
            raise RuntimeInputError("model", _("must be a model name"))
        model = ModelConfig.objects.filter(name=model_name, enabled=True).first()
        if model is None:
            raise RuntimeInputError("model", _("no enabled model named %(model_name)r") % {"model_name": model_name})
        if not model.usable:
            raise RuntimeInputError("model", _("model %(model_name)r has no API key configured (%(model_api_key_env)s is not set)") % {"model_name": model_name, "model_api_key_env": model.api_key_env})
    if images and not model.supports_images:
        raise RuntimeInputError("images", _("model %(model_name)r does not take images") % {"model_name": model.name})
    if thinking_level is not None:
        if thinking_level not in THINKING_LEVELS:
            raise RuntimeInputError("thinkingLevel", _("must be one of %(join_thinking_levels)s") % {"join_thinking_levels": ', '.join(THINKING_LEVELS)})
        if thinking_level != "off" and not model.supports_thinking:
            raise RuntimeInputError("thinkingLevel", _("model %(model_name)r does not support thinking: only 'off'") % {"model_name": model.name})
    return model


def _set_thinking_level(meta: AgentSession, thinking_level: str | None) -> None:
    """Pi's ``setThinkingLevel``: a ``thinking_level_change`` entry at the leaf when the
    level the path sets differs (the turn reads the level from the path)."""
    if thinking_level is None:
        return
    provider = get_provider(meta.provider)
    if provider.build_context(meta.session_id).thinking_level != thinking_level:
        provider.append_thinking_level_change(meta.session_id, thinking_level)


def session_prompt(
    *,
    session_id: str,
    text: str,
    actor,
    images=None,
    from_entry_id: str | None = None,
    mode: str = RunInputKind.FOLLOW_UP,
    model_name: str | None = None,
    thinking_level: str | None = None,
    dispatch: bool = True,
    meta: AgentSession | None = None,
    instructions: str = "",
    sampling: dict | None = None,
    queue: bool = True,
    prepare=None,
    start: bool = True,
    documents=None,
) -> PromptOutcome:
    """Send ``text`` to the session's agent.

    While a run is active the text is queued on it, as a follow-up (default) or
    to steer it. ``from_entry_id`` continues from a history node (Pi's ``/tree``
    rule): from a user message its parent becomes the leaf, from any other node
    that node.

    ``actor`` is who prompts (the owner, or staff on another user's session; None from
    the command line): the run records it (``AgentRun.user``), and the tree events the
    prompt and its run write name it (``SessionEvent.actor``).

    ``model_name`` is the model of this run only (default: the agent's); ``thinking_level``
    is written to the path (a ``thinking_level_change`` entry, Pi's way) before the prompt,
    when it differs. Both are checked against the model's capabilities.

    ``documents`` (``[{name, data, mimeType?}]``, runs/documents.py): their text joins the
    user message as wrapped text blocks after the prompt's text (stored with the images as
    the run's attachments), within the same entry size limit.

    ``meta``: the session's row as the caller has just read it (the API's access check),
    else it is read here; either way it is locked and read again before anything is written.

    For callers that hold a conversation of their own (the OpenAI endpoints, runtime/openai_api/):
    ``instructions`` and ``sampling`` go with the run (added to the system prompt, passed to
    the model); ``queue=False`` refuses (``SessionBusy``) instead of queueing on an active run;
    ``prepare(meta)`` makes the caller's tree writes (the leaf moved to an exact entry, earlier
    messages appended) under the same locks, after the active-run check and before the prompt,
    as ``actor``; ``start=False`` records the run's submission but leaves handing it to its
    backend to the caller (``backends.submit_run(run, recorded=True)``), who subscribes to
    its events first.
    """

    text = _clean_text(text)
    instructions = _clean_instructions(instructions)
    doc_blocks = clean_documents(documents)
    if doc_blocks and len(orjson.dumps([text, *doc_blocks])) > max_prompt_bytes():
        raise RuntimeInputError("documents", _("text and documents together are over %(max_prompt_bytes)s bytes (one entry holds at most NETA_MAX_ENTRY_BYTES)") % {"max_prompt_bytes": max_prompt_bytes()})
    images = _clean_images(images, text=text + "".join(b["text"] for b in doc_blocks))
    if mode not in (RunInputKind.FOLLOW_UP, RunInputKind.STEER):
        raise RuntimeInputError("mode", _("must be 'follow_up' or 'steer'"))
    if meta is None or meta.session_id != session_id:
        meta = session_or_not_found(session_id)
    agent = agent_for_session(meta)
    check_agent_use(agent, actor)  # 403 for a user the agent is not open to (a command may)
    run_user = actor if getattr(actor, "pk", None) else None
    _clean_model(model_name, agent=agent, images=images, thinking_level=thinking_level)
    images = [*doc_blocks, *images]  # the run's attachments: documents (text blocks), then images
    reap_session(session_id)
    # Continuing from another entry moves the leaf: that takes the store's write lock, which
    # comes before the row lock (the providers' order), so it is taken first here.
    # Setting the thinking level writes an entry too.
    writes_tree = from_entry_id or thinking_level is not None or prepare is not None
    store_lock = get_provider(meta.provider).write_lock(session_id) if writes_tree else contextlib.nullcontext()
    # The run_state events sent when it commits belong to this row (the lock below checks
    # it is still the session's): no lookup to tag them.
    with streaming_row(session_id, meta.pk), store_lock, transaction.atomic():
        # Serialized with session_delete on the row: if the session went meanwhile this is a
        # 404, and once the run below is committed a delete sees it and refuses.
        # The one lock of the decision (runs/locks.py): the session row. Under it the active
        # run read below stays the active run until this transaction ends.
        meta = lock_session(meta)
        current = active_run(session_id)
        if current is not None:
            if not queue:
                raise SessionBusy("a run is active: wait for it to end or abort it")
            if from_entry_id:
                raise SessionBusy("a run is active: abort it or wait before continuing from another entry")
            lifecycle.queue_input(current, kind=mode, text=text, images=images, user=run_user)
            return PromptOutcome(run=current, queued_as=mode)
        editor_text = None
        with acting_as(actor):
            if from_entry_id:
                editor_text = _continue_from(meta, from_entry_id)
            if prepare is not None:
                prepare(meta)
            _set_thinking_level(meta, thinking_level)
        run = lifecycle.create_run(
            meta,
            agent=agent,
            user=run_user,
            prompt=text,
            images=images,
            from_entry_id=from_entry_id or "",
            model_name=model_name or "",
            instructions=instructions,
            sampling=sampling,
            submission=first_submission() if dispatch else None,
        )
        if dispatch and start:
            submit_run(run, recorded=True)
    return PromptOutcome(run=run, queued_as=None, editor_text=editor_text)


def session_regenerate(
    *,
    session_id: str,
    entry_id: str,
    actor,
    model_name: str | None = None,
    dispatch: bool = True,
    instructions: str = "",
    sampling: dict | None = None,
    start: bool = True,
) -> AgentRun:
    """A new answer to the user message ``entry_id``, beside the answers it has (a sibling):
    the leaf moves to that message and a run starts from it, with no new user entry.

    The run's ``prompt_entry_id`` is that message from the start, so the turn stores no
    prompt of its own and a reaper never carries it into another run. Refused while a run
    is active (``SessionBusy``, 409); the entry must be a user message (``entryId``, 400).
    No thinking level here: its entry would stand between the message and the new answer,
    which would then not be a sibling of the others.
    ``instructions``, ``sampling`` and ``start`` as for ``session_prompt``.
    """
    instructions = _clean_instructions(instructions)
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", _("must be an entry id"))
    meta = session_or_not_found(session_id)
    agent = agent_for_session(meta)
    provider = get_provider(meta.provider)
    entry = provider.get_entry(session_id, entry_id)  # EntryNotFound: 400 naming entryId
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "user":
        raise RuntimeInputError("entryId", _("must be a user message: an answer is regenerated from the message it answers"))
    text, images = _prompt_of(message)
    _clean_model(model_name, agent=agent, images=images, thinking_level=None)
    run_user = actor if getattr(actor, "pk", None) else None
    reap_session(session_id)
    with provider.write_lock(session_id), transaction.atomic():
        meta = lock_session(meta)
        if active_run(session_id) is not None:
            raise SessionBusy("a run is active: abort it or wait before regenerating an answer")
        if meta.leaf_entry_id != entry_id:
            with acting_as(actor):
                provider.switch_leaf(session_id, entry_id)
        run = lifecycle.create_run(
            meta,
            agent=agent,
            user=run_user,
            prompt=text,
            images=images,
            from_entry_id=entry_id,
            model_name=model_name or "",
            prompt_entry_id=entry_id,
            instructions=instructions,
            sampling=sampling,
            submission=first_submission() if dispatch else None,
        )
        if dispatch and start:
            submit_run(run, recorded=True)
    return run


def _prompt_of(message: dict) -> tuple[str, list[dict]]:
    """A stored user message's text and images, as a prompt gives them."""
    content = message.get("content")
    if isinstance(content, str):
        return content, []
    blocks = content if isinstance(content, list) else []
    text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    images = [
        {"data": b["data"], "mimeType": b["mimeType"]}
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "image" and isinstance(b.get("data"), str) and b.get("mimeType") in IMAGE_TYPES
    ]
    return text, images


def _continue_from(meta: AgentSession, entry_id: str) -> str | None:
    """Move the leaf for a prompt from ``entry_id`` (the navigation switch-leaf uses); its editor text."""
    _moved, editor_text = get_provider(meta.provider).navigate(meta.session_id, entry_id)
    return editor_text


QUESTION_ABORTED_TEXT = "The run was aborted while this question waited for an answer."


def run_abort(*, session_id: str | None = None, run: AgentRun | None = None, actor=None) -> AgentRun | None:
    """Ask the session's active run (or ``run``) to stop, on behalf of ``actor`` (who is
    recorded, and named in the run's error): a running run stops cooperatively, a run
    still queued is aborted at once (``lifecycle.abort``)."""

    outcome = lifecycle.abort(session_id=session_id, run=run, actor=actor)
    if outcome.was_waiting:  # its ask_user call gets its result, so the next context is valid
        close_open_tool_calls(provider_for_session(outcome.run.session_id), outcome.run.session_id, text=QUESTION_ABORTED_TEXT)
    if outcome.run is not None and not outcome.stopped and outcome.run.status == RunStatus.RUNNING:
        cancel_local(outcome.run.run_id)  # wake it now if it runs in this process
    return outcome.run


CONTINUE_TYPE = "neta.continue"
CONTINUE_TEXT = (
    "Your previous answer was cut off at the output limit. Continue it exactly where it stopped: "
    "no preamble, no repetition of what you already wrote."
)


def session_continue(*, session_id: str, entry_id: str, actor, dispatch: bool = True) -> AgentRun:
    """Continue the answer ``entry_id`` that stopped at the output limit (``stopReason`` "length"):
    the leaf moves to it, a ``custom_message`` (customType ``neta.continue``, ``display: false``:
    the model reads it as the user's turn, the page does not show it) asks the model to go on,
    and a run answers from there. The page draws the two answers as one (docs/chat.md).
    400 ``entryId`` when it is not such an answer; 409 while a run is active."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", _("must be an entry id"))
    meta = session_or_not_found(session_id)
    agent = agent_for_session(meta)
    check_agent_use(agent, actor)
    provider = get_provider(meta.provider)
    entry = provider.get_entry(session_id, entry_id)  # EntryNotFound: 400 naming entryId
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant" or message.get("stopReason") != "length":
        raise RuntimeInputError("entryId", _("must be an answer cut at the output limit (stopReason 'length')"))
    run_user = actor if getattr(actor, "pk", None) else None
    reap_session(session_id)
    with provider.write_lock(session_id), transaction.atomic():
        meta = lock_session(meta)
        if active_run(session_id) is not None:
            raise SessionBusy("a run is active: abort it or wait before continuing an answer")
        with acting_as(actor):
            if meta.leaf_entry_id != entry_id:
                provider.switch_leaf(session_id, entry_id)
            ask = provider.append_custom_message(
                session_id, custom_type=CONTINUE_TYPE, content=[{"type": "text", "text": CONTINUE_TEXT}], display=False
            )
        run = lifecycle.create_run(
            meta,
            agent=agent,
            user=run_user,
            prompt=CONTINUE_TEXT,
            from_entry_id=entry_id,
            prompt_entry_id=ask["id"],
            submission=first_submission() if dispatch else None,
        )
        if dispatch:
            submit_run(run, recorded=True)
    return run


def queued_inputs(session_id: str) -> list[dict]:
    """The prompts queued on the session's active run and not taken into the tree yet
    (follow-ups and steers), oldest first: what the chat page lists above its composer."""
    run = active_run(session_id)
    if run is None:
        return []
    rows = RunInput.objects.filter(run=run, consumed=False).order_by("id").values("id", "kind", "text", "created_at")
    return [{"id": r["id"], "mode": r["kind"], "text": r["text"], "createdAt": r["created_at"].isoformat()} for r in rows]
