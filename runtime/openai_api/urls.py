"""``/v1/`` routes (included by ``neta.urls``): OpenAI's paths, without trailing slashes."""

from django.urls import path, re_path

from runtime.openai_api import views
from runtime.openai_api.errors import not_found

app_name = "openai"
urlpatterns = [
    path("models", views.ModelsApi.as_view(), name="models"),
    path("models/<str:model>", views.ModelApi.as_view(), name="model"),
    path("responses", views.ResponsesApi.as_view(), name="responses"),
    path("responses/<str:response_id>", views.ResponseApi.as_view(), name="response"),
    path("chat/completions", views.ChatCompletionsApi.as_view(), name="chat-completions"),
    re_path(r"^.*$", not_found),
]
