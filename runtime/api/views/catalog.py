"""The catalog: agents (and their effective tools), models, skills."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.agents.access import usable_agents
from runtime.agents.services import agent_update, model_config_update
from runtime.agents.subagent_policy import SubagentPolicy, SubagentPolicyError
from runtime.agents.tools import agent_tool_projection
from runtime.api import serializers as S
from runtime.api.errors import ApiError
from runtime.api.pagination import (
    NameCursorPagination,
    SkillCursorPagination,
)
from runtime.api.views.base import ERROR, READ_ERRORS
from runtime.models import Agent, ModelConfig
from runtime.subagents.host import child_projections
from skills_registry.models import SkillResource
from toolcatalog.policy import PolicyError


class ApiValidation(exceptions.ValidationError):
    """A model's validation errors in the API's error shape (``fields``: a list of messages each)."""

    def __init__(self, fields: dict):
        super().__init__({k: [str(m) for m in v] for k, v in fields.items()})


# What PATCH /api/agents/{name}/ takes: the API's names → the agent's fields.
AGENT_WRITABLE = {
    "description": "description", "systemPrompt": "system_prompt", "fallbackModels": "fallback_models",
    "thinkingLevel": "thinking_level", "maxToolRounds": "max_tool_rounds", "compactionEnabled": "compaction_enabled",
    "enabled": "enabled",
}  # fmt: skip


def require_staff_perm(request, perm: str, message: str) -> None:
    if not (request.user.is_staff and request.user.has_perm(perm)):
        raise ApiError("forbidden", message, status_code=403)


def staff_patch(request, model, writable: dict[str, str], update):
    """A PATCH body of API field names (``writable``: API name → model field) handed to the
    service ``update(changes)``; the service's ``ValidationError`` comes back as 400 ``invalid``
    under the API's names, and nothing is saved."""
    body = request.data
    if not isinstance(body, dict) or not body:
        raise ApiError("invalid", _("give an object of the fields to change"), status_code=400)
    unknown = sorted(set(body) - set(writable))
    if unknown:
        raise ApiError("invalid", _("cannot change %(join_unknown)s (one of: %(join_writable)s)") % {"join_unknown": ', '.join(unknown), "join_writable": ', '.join(writable)}, status_code=400, field=unknown[0])
    # full_clean lets None through a blank=True field that is not nullable; the save would fail.
    nulled = sorted(key for key, value in body.items() if value is None and not model._meta.get_field(writable[key]).null)
    if nulled:
        raise ApiValidation({key: ["may not be null"] for key in nulled})
    try:
        return update({writable[key]: value for key, value in body.items()})
    except ValidationError as exc:
        api_names = {field: key for key, field in writable.items()}
        raise ApiValidation({api_names.get(field, field): messages for field, messages in exc.message_dict.items()}) from None


@extend_schema_view(
    list=extend_schema(summary="Agents", responses={200: S.AgentOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One agent", responses={200: S.AgentDetailOut, **READ_ERRORS}),
    partial_update=extend_schema(
        summary="Change an agent (staff with change permission): validated as the console validates it",
        request={"application/json": {"type": "object", "properties": {k: {} for k in AGENT_WRITABLE}}},
        responses={200: S.AgentDetailOut, **READ_ERRORS, 400: ERROR, 403: ERROR},
    ),
)
class AgentViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = Agent.objects.select_related("model")
        return qs if self.request.user.is_staff else usable_agents(self.request.user, qs)  # the agents they may use

    def get_serializer_class(self):
        return S.AgentDetailOut if self.action in ("retrieve", "partial_update") else S.AgentOut

    def partial_update(self, request, name=None):
        """Through ``agent_update`` (audited), the console's validation (``Agent.full_clean``):
        e.g. a fallback model that is unknown, disabled, listed twice or the agent's own is 400
        ``invalid`` with the reason under ``fields.fallbackModels``; nothing is saved."""
        require_staff_perm(request, "runtime.change_agent", "changing an agent needs staff with the change agent permission")
        agent = self.get_object()
        agent = staff_patch(request, Agent, AGENT_WRITABLE, lambda changes: agent_update(agent_id=agent.pk, actor=request.user, changes=changes))
        return Response(S.AgentDetailOut(agent).data)


class AgentToolsApi(APIView):
    @extend_schema(
        summary="The agent's effective tool projection, with the reason for each decision (?for=subagent: as a subagent child, and `children`: what each child agent it may delegate to gets from it)",
        parameters=[OpenApiParameter("for", str, enum=["agent", "subagent"], required=False)],
        responses={200: S.ToolProjectionOut, **READ_ERRORS, 400: ERROR, 409: ERROR},
    )
    def get(self, request, name: str):

        qs = Agent.objects.all() if request.user.is_staff else usable_agents(request.user)
        agent = qs.filter(name=name).first()
        if agent is None:
            raise ApiError("not_found", _("no agent named %(name)r") % {"name": name}, status_code=404)
        role = request.query_params.get("for", "agent")
        if role not in ("agent", "subagent"):
            raise ApiError("invalid_input", _("for must be 'agent' or 'subagent', not %(role)r") % {"role": role}, status_code=400)
        try:
            SubagentPolicy.from_dict(agent.subagent_policy)
        except SubagentPolicyError as exc:
            raise ApiError("invalid_agent_config", _("the agent's subagent policy is invalid: %(exc)s") % {"exc": exc}, status_code=409) from exc
        try:
            # for=subagent: what a child of this agent's kind gets at most (its parent's policy narrows it further)
            projection = agent_tool_projection(agent, for_subagent=role == "subagent")
        except PolicyError as exc:
            raise ApiError("invalid_agent_config", _("the agent's tool policy is invalid: %(exc)s") % {"exc": exc}, status_code=409) from exc
        body = {"agent": agent.name, **projection.to_dict()}
        if role == "subagent":
            body["children"] = child_projections(agent)
        return Response(body)


# What PATCH /api/models/{name}/ takes: the API's names → the model's fields.
MODEL_WRITABLE = {
    "displayName": "display_name", "providerKind": "provider_kind", "providerName": "provider_name", "modelId": "model_id",
    "baseUrl": "base_url", "apiKeyEnv": "api_key_env", "contextWindow": "context_window", "maxOutputTokens": "max_output_tokens",
    "supportsTools": "supports_tools", "supportsThinking": "supports_thinking", "supportsImages": "supports_images",
    "priceInput": "price_input", "priceOutput": "price_output", "priceCacheRead": "price_cache_read",
    "priceCacheWrite": "price_cache_write", "options": "options", "enabled": "enabled",
}


@extend_schema_view(
    list=extend_schema(summary="Models (no secrets: only whether a key is configured)", responses={200: S.ModelOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One model", responses={200: S.ModelOut, **READ_ERRORS}),
    partial_update=extend_schema(
        summary="Change a model (staff with change permission): validated as the console validates it, options against their schema",
        request={"application/json": {"type": "object", "properties": {k: {} for k in MODEL_WRITABLE}}},
        responses={200: S.ModelOut, **READ_ERRORS, 400: ERROR, 403: ERROR},
    ),
)
class ModelViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.ModelOut
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = ModelConfig.objects.all()
        return qs if self.request.user.is_staff else qs.filter(enabled=True)

    def partial_update(self, request, name=None):
        """Through ``model_config_update`` (audited), the console's validation: a wrong option is
        400 ``invalid`` with the option's message under ``fields.options``; nothing is saved."""
        require_staff_perm(request, "runtime.change_modelconfig", "changing a model needs staff with the change model permission")
        model = self.get_object()
        model = staff_patch(request, ModelConfig, MODEL_WRITABLE, lambda changes: model_config_update(model_id=model.pk, actor=request.user, changes=changes))
        return Response(S.ModelOut(model).data)


@extend_schema_view(
    list=extend_schema(summary="Skills in the registry", responses={200: S.SkillOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One skill", responses={200: S.SkillOut, **READ_ERRORS}),
)
class SkillViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.SkillOut
    pagination_class = SkillCursorPagination

    def get_queryset(self):
        qs = SkillResource.objects.all()
        if not self.request.user.is_staff:
            qs = qs.filter(status=SkillResource.Status.ACTIVE, disabled=False)
        return qs
