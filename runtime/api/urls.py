"""``/api/`` routes (included by ``neta.urls``)."""

from django.urls import path, re_path
from django.views import View
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from runtime.api import views
from runtime.api.errors import api_not_found

router = SimpleRouter(trailing_slash=True)
router.register("sessions", views.SessionViewSet, basename="session")
router.register("agents", views.AgentViewSet, basename="agent")
router.register("models", views.ModelViewSet, basename="model")
router.register("skills", views.SkillViewSet, basename="skill")
router.register("runs", views.RunViewSet, basename="run")

SESSION = "sessions/<str:session_id>/"


class DocsPage(SpectacularSwaggerView):
    """The Swagger page. Its renderer is an HTML template, which DRF's OPTIONS
    metadata cannot fill (TemplateDoesNotExist, a 500): OPTIONS answers as
    Django's plain views do, with ``Allow`` and no body."""

    def options(self, request, *args, **kwargs):
        return View.options(self, request, *args, **kwargs)


app_name = "api"
urlpatterns = [
    path("sessions/import/", views.SessionImportApi.as_view(), name="session-import"),
    path(SESSION + "snapshot/", views.SessionSnapshotApi.as_view(), name="session-snapshot"),
    path(SESSION + "entries/", views.SessionEntriesApi.as_view(), name="session-entries"),
    path(SESSION + "events/", views.SessionEventsApi.as_view(), name="session-events"),
    path(SESSION + "prompt/", views.SessionPromptApi.as_view(), name="session-prompt"),
    path(SESSION + "abort/", views.SessionAbortApi.as_view(), name="session-abort"),
    path(SESSION + "switch-leaf/", views.SessionLeafSwitchApi.as_view(), name="session-switch-leaf"),
    path(SESSION + "labels/", views.SessionLabelApi.as_view(), name="session-labels"),
    path(SESSION + "compact/", views.SessionCompactApi.as_view(), name="session-compact"),
    path(SESSION + "fork/", views.SessionForkApi.as_view(), name="session-fork"),
    path(SESSION + "export/", views.SessionExportApi.as_view(), name="session-export"),
    path("agents/<str:name>/tools/", views.AgentToolsApi.as_view(), name="agent-tools"),
    path("me/", views.MeApi.as_view(), name="me"),
    path("csrf/", views.CsrfApi.as_view(), name="csrf"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", DocsPage.as_view(url_name="api:schema"), name="docs"),
    *router.urls,
    re_path(r"^.*$", api_not_found),
]
