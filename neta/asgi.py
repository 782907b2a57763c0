"""ASGI entry point: HTTP (Django, the REST API) and websockets (the realtime gateway).

Websockets: the Origin must be the handshake's own scheme, host and port (or one
of CSRF_TRUSTED_ORIGINS), exactly as Django's CSRF check wants it
(``neta.websocket_origin``); the user comes from the session cookie, or from an
``Authorization: Token …`` header (integrations).

Requests and sockets run their synchronous code on fixed sets of threads that
keep their database connections (``infra.http_threads``).
"""

import os

from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

import django  # noqa: E402

# Initialize Django (apps, settings) before anything imports models.
django.setup(set_prefix=False)

from infra.http_threads import PooledASGIHandler, keep_socket_connections  # noqa: E402

django_asgi_app = PooledASGIHandler(settings.NETA_HTTP_THREADS)
keep_socket_connections()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from neta.body_limit import BodyLimitMiddleware  # noqa: E402
from neta.websocket_origin import OriginValidator  # noqa: E402
from runtime.api.authentication import SocketAuthMiddleware  # noqa: E402
from runtime.gateway.routing import websocket_urlpatterns  # noqa: E402

http_app = django_asgi_app
if settings.NETA_SERVE_STATIC:
    from neta.static_serving import static_files_app

    http_app = static_files_app(django_asgi_app)  # hashed names cached for good (docs/chat.md)

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(http_app),  # API bodies over their limit: 413 as they arrive
        "websocket": OriginValidator(SocketAuthMiddleware(URLRouter(websocket_urlpatterns))),
    }
)
