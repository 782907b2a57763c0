from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

admin.site.site_header = "Neta console"
admin.site.site_title = "Neta console"
admin.site.index_title = "Agents, tools, skills, models and sessions"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("runtime.api.urls")),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
