from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Neta console"
admin.site.site_title = "Neta console"
admin.site.index_title = "Agents, tools, skills, models and sessions"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("runtime.api.urls")),
    path("", include("runtime.urls_pages")),
]
