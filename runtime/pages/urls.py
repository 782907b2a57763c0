"""Page routes (included at the site root by ``neta.urls``)."""

from django.urls import path

from runtime.pages import language, views
from runtime.pages.login_throttle import throttled_login

app_name = "pages"
urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("sessions/<str:session_id>/", views.chat_page, name="session"),
    path("share/<str:token>/", views.share_page, name="share"),
    path("login/", throttled_login(language.remember_language(views.LoginView.as_view())), name="login"),
    path("language/", language.set_language, name="set_language"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("favicon.ico", views.favicon, name="favicon"),
]
