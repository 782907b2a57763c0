"""``/v1/``: the OpenAI-compatible endpoints (docs/api.md, "OpenAI-compatible endpoints").

DRF views with the REST API's token authentication (``Authorization: Bearer neta_…``), its
permission (a read-only token only reads), its throttles and its access rule, answering in
OpenAI's error shape. Their synchronous part (the checks, the tree writes, the run) runs on a
request thread like any view; following the run does not (``answers.py``).
"""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.agents.access import usable_agents
from runtime.api.authentication import ApiTokenAuthentication
from runtime.api.permissions import ApiAccess
from runtime.models import AgentRun, ApiToken
from runtime.openai_api import ids, shapes
from runtime.openai_api.answers import chat_answer, response_answer
from runtime.openai_api.errors import OpenAIError, exception_handler, invalid
from runtime.openai_api.inputs import chat_call, responses_call
from runtime.openai_api.start import SESSION_HEADER, start_chat, start_response, usable_agent
from runtime.openai_api.turns import run_of, turn_of
from runtime.runs.locks import session_or_none
from runtime.sessions.access import session_access
from sessions_tree.providers import provider_for_session


class BearerAuthentication(ApiTokenAuthentication):
    """Neta API tokens, as OpenAI clients send keys: ``Authorization: Bearer neta_…``."""

    def authenticate_header(self, request):
        return "Bearer"


class OpenAIApi(APIView):
    authentication_classes = [BearerAuthentication]
    permission_classes = [ApiAccess]
    schema = None  # OpenAI's API, not Neta's: not in /api/schema/

    def get_exception_handler(self):
        return exception_handler


def _model(agent) -> dict:
    return {"id": agent.name, "object": "model", "created": int(agent.created_at.timestamp()), "owned_by": "neta"}


class ModelsApi(OpenAIApi):
    """``GET /v1/models``: the agents the caller may use."""

    def get(self, request):
        agents = usable_agents(request.user).order_by("name").only("name", "created_at")
        return Response({"object": "list", "data": [_model(a) for a in agents]})


class ModelApi(OpenAIApi):
    def get(self, request, model: str):
        return Response(_model(usable_agent(model, request.user)))


class ResponsesApi(OpenAIApi):
    """``POST /v1/responses``."""

    def post(self, request):
        call = responses_call(request.data)
        started = start_response(request, call)
        return response_answer(started, request.user)


class ResponseApi(OpenAIApi):
    """``GET /v1/responses/{id}``: the response again, as the tree holds it now."""

    def get(self, request, response_id: str):
        missing = OpenAIError(404, f"Response with id {response_id[:100]!r} not found.", param="response_id", code="response_not_found")
        parsed = ids.parse_response_id(response_id)
        if parsed is None:
            raise missing
        token = request.auth if isinstance(request.auth, ApiToken) else None
        if isinstance(parsed, str):  # a run that ended before it answered
            run = AgentRun.objects.select_related("agent").filter(run_id=parsed).first()
            if run is None or not session_access(request.user, session_or_none(run.session_id), token=token).read:
                raise missing
            return Response(_unanswered(run), headers={SESSION_HEADER: run.session_id})
        session_id, entry_id = parsed
        meta = session_or_none(session_id)
        if not session_access(request.user, meta, token=token).read:
            raise missing
        turn = turn_of(session_id, entry_id)
        if turn is None:
            raise missing
        status, error = turn.stop()
        run = run_of(turn)
        previous = _previous(turn)
        body = shapes.response_object(
            response_id=ids.response_id(session_id, turn.last_id), agent=turn.agent, created_at=turn.created_at(),
            status=status, turn=turn, error=error, reason=shapes.incomplete_reason(None, turn),
            instructions=run.instructions if run is not None else "", sampling=run.sampling if run is not None else {},
            previous_response_id=previous,
        )  # fmt: skip
        return Response(body, headers={SESSION_HEADER: session_id})


def _unanswered(run: AgentRun) -> dict:
    """The response of a run that wrote no answer: queued or running still, or ended without one."""
    status = {"queued": "queued", "running": "in_progress", "waiting": "in_progress", "aborted": "cancelled"}.get(run.status, "failed")
    return shapes.response_object(
        response_id=ids.run_response_id(run.run_id), agent=run.agent.name, created_at=int(run.created_at.timestamp()),
        status=status, error=run.error or ("the run ended before it answered" if status == "failed" else None),
        instructions=run.instructions, sampling=run.sampling,
    )  # fmt: skip


def _previous(turn) -> str | None:
    """The response the turn continued: the nearest assistant reply above its user message."""
    if turn.prompt is None or not turn.prompt.get("parentId"):
        return None

    provider = provider_for_session(turn.session_id)
    for entry in reversed(provider.get_active_path(turn.session_id, turn.prompt["parentId"])):
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "user":
            return None
        if isinstance(message, dict) and message.get("role") == "assistant":
            return ids.response_id(turn.session_id, entry["id"])
    return None


class ChatCompletionsApi(OpenAIApi):
    """``POST /v1/chat/completions``."""

    def post(self, request):
        call = chat_call(request.data)
        pinned = request.headers.get(SESSION_HEADER)
        if pinned is not None:
            pinned = pinned.strip()
            if not pinned or len(pinned) > 64:
                raise invalid(SESSION_HEADER, "must be a session id")
        started = start_chat(request, call, pinned)
        return chat_answer(started, request.user)
