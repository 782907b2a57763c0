"""ASGI entry point: HTTP (Django) and, from the gateway on, websockets."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402

http_app = django_asgi_app
if settings.NETA_SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    http_app = ASGIStaticFilesHandler(django_asgi_app)

application = ProtocolTypeRouter({"http": http_app})
