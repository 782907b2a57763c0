"""The catalog: agents (and their effective tools), models, skills."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.agents.access import usable_agents
from runtime.agents.tools import agent_tool_projection
from runtime.api import serializers as S
from runtime.api.errors import ApiError
from runtime.api.pagination import (
    NameCursorPagination,
    SkillCursorPagination,
)
from runtime.api.views.base import ERROR, READ_ERRORS
from runtime.models import Agent, ModelConfig
from runtime.subagent_policy import SubagentPolicy, SubagentPolicyError
from skills_registry.models import SkillResource
from toolcatalog.policy import PolicyError


@extend_schema_view(
    list=extend_schema(summary="Agents", responses={200: S.AgentOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One agent", responses={200: S.AgentDetailOut, **READ_ERRORS}),
)
class AgentViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = Agent.objects.select_related("model")
        return qs if self.request.user.is_staff else usable_agents(self.request.user, qs)  # the agents they may use

    def get_serializer_class(self):
        return S.AgentDetailOut if self.action == "retrieve" else S.AgentOut


class AgentToolsApi(APIView):
    @extend_schema(
        summary="The agent's effective tool projection, with the reason for each decision (?for=subagent: as a subagent child)",
        parameters=[OpenApiParameter("for", str, enum=["agent", "subagent"], required=False)],
        responses={200: S.ToolProjectionOut, **READ_ERRORS, 400: ERROR, 409: ERROR},
    )
    def get(self, request, name: str):


        qs = Agent.objects.all() if request.user.is_staff else usable_agents(request.user)
        agent = qs.filter(name=name).first()
        if agent is None:
            raise ApiError("not_found", f"no agent named {name!r}", status_code=404)
        role = request.query_params.get("for", "agent")
        if role not in ("agent", "subagent"):
            raise ApiError("invalid_input", f"for must be 'agent' or 'subagent', not {role!r}", status_code=400)
        try:
            SubagentPolicy.from_dict(agent.subagent_policy)
        except SubagentPolicyError as exc:
            raise ApiError("invalid_agent_config", f"the agent's subagent policy is invalid: {exc}", status_code=409) from exc
        try:
            # for=subagent: what a child of this agent's kind gets at most (its parent's policy narrows it further)
            projection = agent_tool_projection(agent, for_subagent=role == "subagent")
        except PolicyError as exc:
            raise ApiError("invalid_agent_config", f"the agent's tool policy is invalid: {exc}", status_code=409) from exc
        return Response({"agent": agent.name, **projection.to_dict()})


@extend_schema_view(
    list=extend_schema(summary="Models (no secrets: only whether a key is configured)", responses={200: S.ModelOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One model", responses={200: S.ModelOut, **READ_ERRORS}),
)
class ModelViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.ModelOut
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    pagination_class = NameCursorPagination

    def get_queryset(self):
        qs = ModelConfig.objects.all()
        return qs if self.request.user.is_staff else qs.filter(enabled=True)


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
