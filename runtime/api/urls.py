"""``/api/`` routes (included by ``neta.urls``)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from runtime.api.errors import api_not_found
from runtime.api.views import (
    account,
    catalog,
    health,
    imports,
    runs,
    schema,
    sessions,
    subagents,
    tokens,
    traces,
    usage,
)

router = SimpleRouter(trailing_slash=True)
router.register("sessions", sessions.SessionViewSet, basename="session")
router.register("agents", catalog.AgentViewSet, basename="agent")
router.register("models", catalog.ModelViewSet, basename="model")
router.register("skills", catalog.SkillViewSet, basename="skill")
router.register("runs", runs.RunViewSet, basename="run")

SESSION = "sessions/<str:session_id>/"


app_name = "api"
urlpatterns = [
    path("sessions/import/", imports.SessionImportApi.as_view(), name="session-import"),
    path("sessions/search/", sessions.SessionSearchApi.as_view(), name="session-search"),
    path(SESSION + "snapshot/", sessions.SessionSnapshotApi.as_view(), name="session-snapshot"),
    path(SESSION + "entries/", sessions.SessionEntriesApi.as_view(), name="session-entries"),
    path(SESSION + "events/", sessions.SessionEventsApi.as_view(), name="session-events"),
    path(SESSION + "prompt/", runs.SessionPromptApi.as_view(), name="session-prompt"),
    path(SESSION + "regenerate/", runs.SessionRegenerateApi.as_view(), name="session-regenerate"),
    path(SESSION + "abort/", runs.SessionAbortApi.as_view(), name="session-abort"),
    path(SESSION + "answer/", runs.SessionAnswerApi.as_view(), name="session-answer"),
    path(SESSION + "approve/", runs.SessionApproveApi.as_view(), name="session-approve"),
    path(SESSION + "approvals/", runs.SessionApprovalsApi.as_view(), name="session-approvals"),
    path(SESSION + "permission-mode/", sessions.SessionPermissionModeApi.as_view(), name="session-permission-mode"),
    path(SESSION + "switch-leaf/", sessions.SessionLeafSwitchApi.as_view(), name="session-switch-leaf"),
    path(SESSION + "labels/", sessions.SessionLabelApi.as_view(), name="session-labels"),
    path(SESSION + "compact/", sessions.SessionCompactApi.as_view(), name="session-compact"),
    path(SESSION + "fork/", sessions.SessionForkApi.as_view(), name="session-fork"),
    path(SESSION + "export/", sessions.SessionExportApi.as_view(), name="session-export"),
    path(SESSION + "continue/", runs.SessionContinueApi.as_view(), name="session-continue"),
    path(SESSION + "queued/", runs.SessionQueuedApi.as_view(), name="session-queued"),
    path(SESSION + "feedback/", sessions.SessionFeedbackApi.as_view(), name="session-feedback"),
    path(SESSION + "shares/", sessions.SessionSharesApi.as_view(), name="session-shares"),
    path(SESSION + "shares/<int:share_id>/", sessions.SessionShareApi.as_view(), name="session-share"),
    path(SESSION + "pin/", sessions.SessionPinApi.as_view(), name="session-pin"),
    path(SESSION + "subagent-runs/", subagents.SessionSubagentRunsApi.as_view(), name="session-subagent-runs"),
    path("subagent-runs/<str:run_id>/", subagents.SubagentRunApi.as_view(), name="subagent-run"),
    path("subagent-runs/<str:run_id>/events/", subagents.SubagentRunEventsApi.as_view(), name="subagent-run-events"),
    path("subagent-runs/<str:run_id>/cancel/", subagents.SubagentRunCancelApi.as_view(), name="subagent-run-cancel"),
    path("agents/<str:name>/tools/", catalog.AgentToolsApi.as_view(), name="agent-tools"),
    path("tokens/", tokens.TokenListApi.as_view(), name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.TokenRevokeApi.as_view(), name="token-revoke"),
    path("tokens/<int:token_id>/rotate/", tokens.TokenRotateApi.as_view(), name="token-rotate"),
    path("me/", account.MeApi.as_view(), name="me"),
    path("me/settings/", account.SettingsApi.as_view(), name="me-settings"),
    path("usage/", usage.UsageApi.as_view(), name="usage"),
    path("runs/<uuid:run_id>/trace/", traces.RunTraceApi.as_view(), name="run-trace"),
    path("health/", health.HealthApi.as_view(), name="health"),
    path("csrf/", account.CsrfApi.as_view(), name="csrf"),
    path("schema/", schema.SchemaApi.as_view(), name="schema"),
    path("docs/", schema.DocsPage.as_view(url_name="api:schema"), name="docs"),
    *router.urls,
    re_path(r"^.*$", api_not_found),
]
