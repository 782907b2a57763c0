"""Starting a turn for an OpenAI request: which session, where in its tree, and the run.

Everything a request may do wrong is checked before anything is written (the agent, the
images against its model, the continuation point, the caller's rights); the tree writes
(the leaf moved to the continuation point, the earlier messages the client sent and the tree
lacks) are made by ``session_prompt``'s ``prepare`` under the session's locks, after the check
that no run is active, as the caller. The run is created with its submission recorded and
started by the follower once it listens (``relay.py``): nothing it streams is missed.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.agents.selectors import agent_by_name
from runtime.errors import RuntimeInputError
from runtime.models import AgentRun, ApiToken
from runtime.openai_api import conversation, ids
from runtime.openai_api.errors import OpenAIError, invalid
from runtime.openai_api.inputs import Call, Message
from runtime.openai_api.turns import Turn, turn_of
from runtime.runs.locks import session_or_none
from runtime.runs.prompts import clean_images, session_prompt, session_regenerate
from runtime.runs.turn import user_message
from runtime.sessions.access import session_access
from runtime.sessions.selectors import current_revision
from runtime.sessions.services import session_start
from sessions_tree.ids import now_ms
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider
from sessions_tree.providers.base import ROOT

SESSION_HEADER = "X-Neta-Session-Id"


@dataclass
class Started:
    """A run started for a request, not yet handed to its backend."""

    run: AgentRun
    session: AgentSession
    revision: int  # the session's revision before the run writes anything
    agent: str
    call: Call
    prompt_entry_id: str | None = None  # a regenerated answer: the user message it answers
    previous_response_id: str | None = None


def usable_agent(name: str, user):
    try:
        return agent_by_name(name, for_user=user)
    except RuntimeInputError:
        raise OpenAIError(
            404, f"The model '{name}' does not exist or you do not have access to it (GET /v1/models lists your agents).",
            param="model", code="model_not_found",
        ) from None  # fmt: skip


def _token(request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


def writable_session(request, session_id: str, *, param: str, code: str = "session_not_found", status: int = 404) -> AgentSession:
    """The session, when the caller may change it: one they may not read is answered as a missing one."""
    meta = session_or_none(session_id)
    access = session_access(request.user, meta, token=_token(request))
    if not access.read:
        raise OpenAIError(status, f"{param}: no session {session_id!r} of yours", param=param, code=code)
    if not access.write:
        raise OpenAIError(403, f"{param}: you may read this session but not change it", param=param, code="permission_denied")
    return meta


def _check_messages(call: Call, agent, param: str) -> None:
    """Texts and images of every message, against the limits of a prompt and the agent's model."""
    for i, message in enumerate(call.messages):
        if message.images:
            try:
                clean_images(message.images, text=message.text)
            except RuntimeInputError as exc:
                raise invalid(param, f"message {i}: {str(exc).split(': ', 1)[-1]}") from None
            if not agent.model.supports_images:
                raise invalid(param, f"the agent's model {agent.model.name!r} does not take images")


def _thinking_level(call: Call, agent) -> str | None:
    """The reasoning effort the client asked for, as a thinking level, when the agent's model thinks
    (it is ignored otherwise, as OpenAI-compatible servers ignore what a model cannot do)."""
    if call.effort is None or not agent.model.supports_thinking:
        return None
    return call.effort


def stored_message(message: Message) -> dict:
    """A message of the client's history as a tree entry holds it. An assistant message the
    tree never had (the client brought it) says so: provider ``client``."""
    if message.role == "user":
        return user_message(message.text, message.images)
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": message.text}] if message.text else [],
        "api": "openai-completions",
        "provider": "client",
        "model": "client",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop",
        "timestamp": now_ms(),
    }  # fmt: skip


def _prepare(at: str | None, history: list[Message]):
    """``session_prompt``'s ``prepare``: the leaf to ``at`` (``ROOT``: before the first entry;
    None: where it is), then the history."""

    def prepare(meta: AgentSession) -> None:
        provider = get_provider(meta.provider)
        if at == ROOT:
            if meta.leaf_entry_id is not None:
                provider.reset_leaf(meta.session_id)
        elif at is not None and meta.leaf_entry_id != at:
            provider.switch_leaf(meta.session_id, at)
        for message in history:
            provider.append_message(meta.session_id, stored_message(message))

    return prepare


def _prompt(request, meta: AgentSession, agent, call: Call, *, at: str | None, history: list[Message]) -> Started:
    outcome = session_prompt(
        session_id=meta.session_id,
        text=call.prompt.text,
        actor=request.user,
        images=call.prompt.images,
        thinking_level=_thinking_level(call, agent),
        meta=meta,
        instructions=call.instructions,
        sampling=call.sampling,
        queue=False,
        prepare=_prepare(at, history) if (history or at is not None) else None,
        start=False,
    )
    return Started(run=outcome.run, session=meta, revision=current_revision(meta.session_id), agent=agent.name, call=call)


def _new_session(request, agent, call: Call) -> Started:
    meta = session_start(agent=agent, user=request.user)
    return _prompt(request, meta, agent, call, at=None, history=call.history)


# --------------------------------------------------------------------------- Responses


def previous_turn(request, value: str, *, write: bool = True) -> Turn:
    """The turn a ``previous_response_id`` names (its end is where the next one continues)."""
    parsed = ids.parse_response_id(value)
    missing = OpenAIError(400, f"Previous response with id {value[:100]!r} not found.", param="previous_response_id", code="previous_response_not_found")
    if parsed is None or isinstance(parsed, str):
        raise missing
    session_id, entry_id = parsed
    if write:
        writable_session(request, session_id, param="previous_response_id", code="previous_response_not_found", status=400)
    turn = turn_of(session_id, entry_id)
    if turn is None or not turn.replies:
        raise missing
    if turn.running:
        raise OpenAIError(409, "previous_response_id: that response is still being written", param="previous_response_id", code="session_busy")
    return turn


def start_response(request, call: Call) -> Started:
    agent = usable_agent(call.model, request.user)
    _check_messages(call, agent, "input")
    if call.previous_response_id is None:
        return _new_session(request, agent, call)
    turn = previous_turn(request, call.previous_response_id)
    meta = session_or_none(turn.session_id)
    if meta.agent != agent.name:
        raise invalid("model", f"the previous response belongs to the agent {meta.agent!r}, not {agent.name!r}")
    started = _prompt(request, meta, agent, call, at=turn.tail_id, history=call.history)
    started.previous_response_id = ids.response_id(turn.session_id, turn.last_id)
    return started


# --------------------------------------------------------------------------- Chat Completions


def start_chat(request, call: Call, pinned: str | None) -> Started:
    agent = usable_agent(call.model, request.user)
    _check_messages(call, agent, "messages")
    digests = conversation.request_digests(call.messages)
    if pinned is not None:
        meta = writable_session(request, pinned, param=SESSION_HEADER)
        if meta.agent != agent.name:
            raise invalid("model", f"session {pinned} belongs to the agent {meta.agent!r}, not {agent.name!r}")
        match = conversation.find_in_session(meta.session_id, digests)
    else:
        match = conversation.find_in_sessions(owner_id=request.user.pk, agent=agent.name, digests=digests)
        if match is None:
            return _new_session(request, agent, call)
        meta = writable_session(request, match.session_id, param="messages")
    rest = call.messages[match.depth :]
    if not rest:
        # The whole conversation is in the tree and ends with a user message: a new answer to
        # it, beside the ones it has (the client's "regenerate").
        run = session_regenerate(
            session_id=meta.session_id, entry_id=match.entry_id, actor=request.user,
            instructions=call.instructions, sampling=call.sampling, start=False,
        )  # fmt: skip
        return Started(run=run, session=meta, revision=current_revision(meta.session_id), agent=agent.name, call=call, prompt_entry_id=match.entry_id)
    if match.entry_id is None:
        at = conversation.conversation_start(meta.session_id) or ROOT
    elif call.messages[match.depth - 1].role == "assistant":
        turn = turn_of(meta.session_id, match.entry_id)  # after its title or compaction, if any
        at = turn.tail_id if turn is not None and not turn.running else match.entry_id
    else:
        at = match.entry_id
    return _prompt(request, meta, agent, call, at=at, history=rest[:-1])
