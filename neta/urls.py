from django.contrib import admin
from django.urls import include, path

from runtime.pages.login_throttle import throttled_login

admin.site.site_header = "Neta console"
admin.site.site_title = "Neta console"
admin.site.index_title = "Agents, tools, skills, models and sessions"

urlpatterns = [
    # The admin's sign-in under the same failed-attempt limits as the chat page's.
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
    path("api/", include("runtime.api.urls")),
    path("", include("runtime.pages.urls")),
]

handler500 = "runtime.api.errors.server_error"
