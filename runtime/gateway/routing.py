"""Websocket routes (``neta.asgi`` wraps them in origin checks and authentication)."""

from django.urls import re_path

from runtime.gateway.consumers import SessionConsumer, UnknownSocketConsumer

websocket_urlpatterns = [
    re_path(r"^ws/sessions/(?P<session_id>[^/]{1,64})/$", SessionConsumer.as_asgi()),
    re_path(r"", UnknownSocketConsumer.as_asgi()),
]
