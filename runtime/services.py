"""Runtime write services: start sessions, prompt, abort, switch, compact, bootstrap.

Views, consumers, commands and tasks call these; they hold no business logic.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from runtime.models import ACTIVE_RUN_STATUSES, Agent, AgentRun, ModelConfig, ProviderKind, RunInput, RunInputKind, RunStatus
from runtime.workspaces import delete_session_directories, new_session_workspace
from sessions_tree.errors import InvalidEntry, SessionBusy, SessionNotFound
from sessions_tree.models import AgentSession, SessionStatus
from sessions_tree.pi_files import import_session_file
from sessions_tree.providers import PROVIDER_KINDS, get_provider, provider_for_session, resolve_session_provider_kind

logger = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 200_000
MAX_IMAGES = 8
MAX_IMAGE_BASE64 = 10 * 1024 * 1024  # one image; all of them and the text must also fit one entry:
PROMPT_ENTRY_RESERVE = 64 * 1024  # what the user entry adds around text and images (ids, keys, timestamps)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def max_prompt_bytes() -> int:
    """Text and images of one prompt together: they become one entry of at most NETA_MAX_ENTRY_BYTES."""
    return settings.NETA_MAX_ENTRY_BYTES - PROMPT_ENTRY_RESERVE


class RuntimeInputError(ValueError):
    """Bad input to a runtime service; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass
class PromptOutcome:
    run: AgentRun
    queued_as: str | None  # None: a new run; "follow_up"/"steer": delivered to the active run
    editor_text: str | None = None


# --------------------------------------------------------------------------- sessions


def session_start(*, agent: Agent, user=None, title: str = "") -> AgentSession:
    """A new session for ``agent``, opened like Pi's SDK: model and thinking level first."""
    provider = get_provider(resolve_session_provider_kind(agent))
    session_id, cwd = new_session_workspace(agent, user)  # the Pi cwd: where this session's tools work
    meta = provider.create_session(session_id=session_id, cwd=str(cwd), user=user, agent=agent.name, title=title)
    model = agent.model
    provider.append_model_change(meta.session_id, provider=model.provider_name or model.provider_kind, model_id=model.model_id)
    provider.append_thinking_level_change(meta.session_id, agent.thinking_level)
    return provider.get_session(meta.session_id)


def session_for_agent(*, agent: Agent, user=None) -> AgentSession:
    """The session a user lands in: the last one when the agent restores sessions, else a new one."""
    if agent.restore_last_session:
        last = AgentSession.objects.filter(agent=agent.name, user=user, status="active").order_by("-updated_at").first()
        if last is not None:
            return last
    return session_start(agent=agent, user=user)


def agent_for_session(meta: AgentSession) -> Agent:
    agent = Agent.objects.select_related("model").filter(name=meta.agent).first() if meta.agent else None
    if agent is None:
        agent = default_agent()
    return agent


def default_agent() -> Agent:
    agent = Agent.objects.select_related("model").filter(name="default", enabled=True).first()
    if agent is None:
        agent = Agent.objects.select_related("model").filter(enabled=True).first()
    if agent is None:
        raise RuntimeInputError("agent", "no agent is configured (run `python manage.py neta_bootstrap`)")
    return agent


# --------------------------------------------------------------------------- prompts and runs


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


def _non_empty(field: str, value, max_chars: int) -> str:
    """``value`` if it is a string with something in it and at most ``max_chars`` long."""
    if not isinstance(value, str) or not value.strip():
        raise RuntimeInputError(field, "must be a non-empty string")
    if len(value) > max_chars:
        raise RuntimeInputError(field, f"is longer than {max_chars} characters")
    return value


def _clean_text(text) -> str:
    return _non_empty("text", text, MAX_PROMPT_CHARS)


def _session_or_not_found(session_id: str) -> AgentSession:
    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return meta


def _lock_session(meta: AgentSession) -> AgentSession:
    """Lock ``meta``'s row (by primary key) for the rest of the transaction and read it again.

    The lock that serializes a session's prompts with its deletion. On
    MySQL/MariaDB it is the row's ``SELECT … FOR UPDATE``. SQLite has no row locks, but
    every transaction there begins ``IMMEDIATE`` (``neta/env.py``), holding the database's
    write lock from its first statement, so this read already excludes every other writer.
    A session deleted meanwhile (or deleted and imported again under the same id, a new
    row) raises ``SessionNotFound``.
    """
    locked = AgentSession.objects.select_for_update().filter(pk=meta.pk, session_id=meta.session_id).first()
    if locked is None:
        raise SessionNotFound(f"no session {meta.session_id!r}")
    return locked


def active_run(session_id: str, *, lock: bool = False) -> AgentRun | None:
    qs = AgentRun.objects.filter(session_id=session_id, status__in=ACTIVE_RUN_STATUSES).order_by("created_at")
    if lock:
        qs = qs.select_for_update()
    return qs.first()


def session_prompt(
    *,
    session_id: str,
    text: str,
    user=None,
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
    """
    from runtime.reaper import reap_session

    text = _clean_text(text)
    images = _clean_images(images, text=text)
    if mode not in (RunInputKind.FOLLOW_UP, RunInputKind.STEER):
        raise RuntimeInputError("mode", "must be 'follow_up' or 'steer'")
    meta = _session_or_not_found(session_id)
    agent = agent_for_session(meta)
    if model_name and not ModelConfig.objects.filter(name=model_name, enabled=True).exists():
        raise RuntimeInputError("model", f"no enabled model named {model_name!r}")
    reap_session(session_id)
    # Continuing from another entry moves the leaf: that takes the store's write lock, which
    # comes before the row lock (the providers' order), so it is taken first here.
    store_lock = get_provider(meta.provider).write_lock(session_id) if from_entry_id else contextlib.nullcontext()
    with store_lock, transaction.atomic():
        # Serialized with session_delete on the row: if the session went meanwhile this is a
        # 404, and once the run below is committed a delete sees it and refuses.
        _lock_session(meta)
        current = active_run(session_id, lock=True)
        if current is not None:
            if from_entry_id:
                raise SessionBusy("a run is active: abort it or wait before continuing from another entry")
            RunInput.objects.create(run=current, kind=mode, text=text, images=images)
            return PromptOutcome(run=current, queued_as=mode)
        editor_text = None
        if from_entry_id:
            editor_text = _continue_from(meta, from_entry_id)
        run = AgentRun.objects.create(
            session_id=session_id,
            agent=agent,
            user=user,
            prompt=text,
            images=images,
            from_entry_id=from_entry_id or "",
            model_name=model_name or "",
            backend=settings.NETA_TASK_BACKEND,
        )
        if dispatch:
            from runtime.backends import submit_run

            submit_run(run)
    return PromptOutcome(run=run, queued_as=None, editor_text=editor_text)


def _continue_from(meta: AgentSession, entry_id: str) -> str | None:
    """Move the leaf for a prompt from ``entry_id`` (the navigation switch-leaf uses); its editor text."""
    _, editor_text = get_provider(meta.provider).navigate(meta.session_id, entry_id)
    return editor_text


def run_abort(*, session_id: str | None = None, run: AgentRun | None = None) -> AgentRun | None:
    """Ask the active run to stop (cooperative); a run still queued is aborted at once."""
    from runtime.backends import cancel_local

    with transaction.atomic():
        if run is None:
            run = active_run(session_id, lock=True)
        else:
            run = AgentRun.objects.select_for_update().get(pk=run.pk)
        if run is None or not run.is_active:
            return run
        if run.status == RunStatus.QUEUED:
            from django.utils import timezone

            AgentRun.objects.filter(pk=run.pk).update(
                status=RunStatus.ABORTED, cancel_requested=True, error="aborted before it started", finished_at=timezone.now()
            )
        else:
            AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    cancel_local(run.run_id)
    run.refresh_from_db()
    return run


def session_switch_leaf(
    *, session_id: str, entry_id: str | None, summarize: bool = False, instructions: str | None = None
) -> dict:
    from runtime.summaries import switch_leaf

    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: abort it or wait before moving the leaf")
    return switch_leaf(session_id, entry_id, agent=agent_for_session(meta), summarize_branch=summarize, instructions=instructions)


def session_compact(*, session_id: str, instructions: str | None = None) -> dict:
    from runtime.summaries import compact_session

    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: abort it or wait before compacting")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidEntry("instructions must be a string")
    return compact_session(session_id, agent=agent_for_session(meta), instructions=instructions)


# --------------------------------------------------------------------------- bootstrap

DEMO_RULES = "runtime/llm/scripted_demo.yaml"
EXAMPLE_MODELS = [
    {
        "name": "claude-sonnet",
        "display_name": "Claude Sonnet 4.5",
        "provider_kind": ProviderKind.ANTHROPIC,
        "model_id": "claude-sonnet-4-5",
        "api_key_env": "ANTHROPIC_API_KEY",
        "context_window": 200000,
        "max_output_tokens": 16384,
        "supports_thinking": True,
        "supports_images": True,
        "price_input": 3,
        "price_output": 15,
        "price_cache_read": "0.3",
        "price_cache_write": "3.75",
    },
    {
        "name": "gpt-4-1",
        "display_name": "GPT-4.1",
        "provider_kind": ProviderKind.OPENAI,
        "model_id": "gpt-4.1",
        "api_key_env": "OPENAI_API_KEY",
        "context_window": 1047576,
        "max_output_tokens": 32768,
        "supports_images": True,
        "price_input": 2,
        "price_output": 8,
        "price_cache_read": "0.5",
    },
    {
        "name": "o4-mini",
        "display_name": "OpenAI o4-mini (Responses API, reasoning summaries)",
        "provider_kind": ProviderKind.OPENAI_RESPONSES,
        "model_id": "o4-mini",
        "api_key_env": "OPENAI_API_KEY",
        "context_window": 200000,
        "max_output_tokens": 100000,
        "supports_thinking": True,
        "supports_images": True,
        "price_input": "1.1",
        "price_output": "4.4",
        "price_cache_read": "0.275",
    },
    {
        "name": "deepseek-chat",
        "display_name": "DeepSeek (OpenAI-compatible)",
        "provider_kind": ProviderKind.OPENAI_COMPATIBLE,
        "provider_name": "deepseek",
        "model_id": "deepseek-chat",
        "base_url": "https://api.deepseek.com",
        "api_key_env": "DEEPSEEK_API_KEY",
        "context_window": 128000,
        "max_output_tokens": 8192,
        "price_input": "0.27",
        "price_output": "1.1",
    },
]


def runtime_bootstrap() -> list[str]:
    """Create the demo model, the example models and the default agent when missing.

    Examples for real providers are enabled only when their key variable is set.
    The default agent uses ``NETA_DEFAULT_MODEL`` if that model is usable, else the
    first example with a key, else the offline scripted demo.
    """
    created = []
    demo, made = ModelConfig.objects.get_or_create(
        name="scripted-demo",
        defaults={
            "display_name": "Scripted demo (offline)",
            "provider_kind": ProviderKind.SCRIPTED,
            "provider_name": "scripted",
            "model_id": "scripted-demo",
            "context_window": 128000,
            "max_output_tokens": 8192,
            "supports_thinking": True,
            "supports_images": True,
            "price_input": 1,
            "price_output": 2,
            "options": {"rules": DEMO_RULES},
        },
    )
    if made:
        created.append("model scripted-demo")
    for spec in EXAMPLE_MODELS:
        _, made = ModelConfig.objects.get_or_create(
            name=spec["name"], defaults={**spec, "enabled": bool(os.environ.get(spec["api_key_env"]))}
        )
        if made:
            created.append(f"model {spec['name']}")
    if not Agent.objects.filter(name="default").exists():
        model = _pick_default_model() or demo
        Agent.objects.create(
            name="default",
            description="The default agent: general help in its workspace.",
            model=model,
            thinking_level="medium" if model.supports_thinking else "off",
        )
        created.append(f"agent default ({model.name})")
    return created


def _pick_default_model() -> ModelConfig | None:
    wanted = settings.NETA_DEFAULT_MODEL
    if wanted and wanted != "auto":
        model = ModelConfig.objects.filter(name=wanted).first()
        if model is not None and model.usable:
            return model
    for spec in EXAMPLE_MODELS:
        model = ModelConfig.objects.filter(name=spec["name"]).first()
        if model is not None and model.usable:
            return model
    return None


# --------------------------------------------------------------------------- session management (API, gateway)

MAX_TITLE = 500
MAX_LABEL = 200


def agent_by_name(name: str | None) -> Agent:
    """The enabled agent called ``name`` (default: the default agent)."""
    if not name:
        return default_agent()
    agent = Agent.objects.select_related("model").filter(name=name, enabled=True).first()
    if agent is None:
        raise RuntimeInputError("agent", f"no enabled agent named {name!r}")
    return agent


def clean_title(title) -> str:
    """A session title as the services take it (forms validate with this too)."""
    return _non_empty("title", title, MAX_TITLE).strip()


def session_create(*, user, agent_name: str | None = None, title: str | None = None) -> AgentSession:
    """A new session for the agent (its provider, model and thinking level), owned by ``user``."""
    agent = agent_by_name(agent_name)
    name = clean_title(title) if title is not None else None
    meta = session_start(agent=agent, user=user)
    if name is not None:
        # Pi's way to name a session: a session_info entry (the title mirrors it).
        get_provider(meta.provider).append_session_info(meta.session_id, name=name)
    return AgentSession.objects.get(pk=meta.pk)


def session_rename(*, session_id: str, title: str) -> dict:
    """Append a ``session_info`` entry (Pi's /name); returns the entry."""
    clean = clean_title(title)
    return provider_for_session(session_id).append_session_info(session_id, name=clean)


def agent_for_session_change(*, meta: AgentSession, agent_name) -> Agent:
    """The enabled agent ``agent_name``, if it may take ``meta`` over (forms validate with this).

    The session keeps its store, so the agent must use the same session provider (runs and
    summaries open the session through their agent's provider).
    """
    if not isinstance(agent_name, str) or not agent_name.strip():
        raise RuntimeInputError("agent", "must be the name of an agent")
    agent = agent_by_name(agent_name)
    kind = resolve_session_provider_kind(agent)
    if kind != meta.provider:
        raise RuntimeInputError(
            "agent", f"agent {agent.name!r} keeps its sessions with the {kind} provider; this one is stored by {meta.provider}"
        )
    return agent


def session_set_agent(*, session_id: str, agent_name: str) -> AgentSession:
    """Hand the session to another enabled agent; one revision and a ``session_updated`` event.

    Its next run uses that agent's model, tools and prompt; a run already active keeps its agent.
    """
    meta = _session_or_not_found(session_id)
    agent = agent_for_session_change(meta=meta, agent_name=agent_name)
    return get_provider(meta.provider).update_session(session_id, agent=agent.name)


def session_set_status(*, session_id: str, status: str) -> AgentSession:
    if status not in SessionStatus.values:
        raise RuntimeInputError("status", f"must be one of {', '.join(SessionStatus.values)}")
    return provider_for_session(session_id).update_session(session_id, status=status)


def session_delete(*, session_id: str) -> None:
    """Delete the session with everything stored for it, in one transaction.

    What goes: its entries (the JSONL file, or the ``SessionEntry`` rows), its meta row and
    event log, its runs and their queued inputs, and (after commit) its per-session workspace
    directory ``<workspace>/sessions/<id>/``. Refused (``SessionBusy``, 409) while a run
    is queued or running; a session that is gone raises ``SessionNotFound`` (404). Serialized
    with ``session_prompt`` on the session row, so an accepted prompt is never deleted
    before its run has finished.
    """
    from runtime.reaper import reap_session

    meta = _session_or_not_found(session_id)
    # A run whose worker died is not active: it does not hold the session, and the prompts
    # it never delivered are not carried into a new run (the session is going).
    reap_session(session_id, deleting=True)
    provider = get_provider(meta.provider)
    # The providers' lock order: the store's write lock (file: flock), then the row.
    with provider.write_lock(session_id), transaction.atomic():
        _lock_session(meta)
        if active_run(session_id, lock=True) is not None:
            raise SessionBusy("a run is active: abort it before deleting the session")
        RunInput.objects.filter(run__session_id=session_id).delete()
        AgentRun.objects.filter(session_id=session_id).delete()
        provider.delete_session(session_id)
    transaction.on_commit(lambda: delete_session_directories(meta))  # its per-session workspace directory (docs/runtime.md)


def session_deletion_summary(*, session_id: str) -> dict:
    """What ``session_delete`` would remove (for a confirmation page), and whether it may now."""
    meta = _session_or_not_found(session_id)
    runs = AgentRun.objects.filter(session_id=session_id)
    return {
        "session": meta,
        "entries": meta.entry_count,
        "file": meta.session_file if meta.provider == "file" else "",
        "events": meta.events.count(),
        "runs": runs.count(),
        "queued_inputs": RunInput.objects.filter(run__session_id=session_id).count(),
        "active_run": active_run(session_id),
    }


def session_label(*, session_id: str, entry_id: str, label: str | None) -> dict:
    """Set (or with ``None``/"" clear) the label of an entry; returns the label entry."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", "must be an entry id")
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
        raise RuntimeInputError("label", f"must be a string of at most {MAX_LABEL} characters, or null")
    label = label.strip() if label else None
    return provider_for_session(session_id).append_label_change(session_id, target_id=entry_id, label=label or None)


def session_fork(*, session_id: str, entry_id: str, user) -> AgentSession:
    """A new session holding the root→``entry_id`` path (Pi's fork), owned by ``user``."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", "must be an entry id")
    return provider_for_session(session_id).create_branched_session(session_id, entry_id, user=user)


def session_import(
    *, path: Path, user, agent_name: str | None = None, provider_kind: str | None = None, source_name: str | None = None
) -> AgentSession:
    """Import a Pi session file for ``user``. A file that is not a Pi session is refused whole.

    A header id that is already stored (whoever owns it) is replaced by a fresh one,
    so an import never tells whether an id exists; ``diagnostics["import"]`` (the
    import report: ``idChanged``, skipped and repaired lines, cycles) says what happened.
    """
    agent = agent_by_name(agent_name)
    kind = provider_kind or resolve_session_provider_kind(agent)
    if kind not in PROVIDER_KINDS:
        raise RuntimeInputError("provider", f"must be one of {', '.join(PROVIDER_KINDS)}")
    return import_session_file(path, provider_kind=kind, user=user, agent=agent.name, source_name=source_name)
