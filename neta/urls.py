from django.contrib import admin
from django.urls import include, path

from runtime.pages.language import remember_language
from runtime.pages.login_throttle import throttled_login

admin.autodiscover()  # the console's admin modules load with the URLconf (neta/console/apps.py)

urlpatterns = [
    # The admin's sign-in under the same failed-attempt limits as the chat page's.
    path("admin/login/", throttled_login(remember_language(admin.site.login))),
    path("admin/", admin.site.urls),
    path("api/", include("runtime.api.urls")),
    path("v1/", include("runtime.openai_api.urls")),  # OpenAI-compatible endpoints (docs/api.md)
    path("", include("runtime.pages.urls")),
]

handler500 = "runtime.api.errors.server_error"
