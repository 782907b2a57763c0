"""Serve Neta with Daphne: ``python -m neta.serve [daphne options] neta.asgi:application``.

Daphne's own command with one change: its websocket size limits (Daphne and
autobahn drop a connection whose message exceeds them, 1 MiB by default, before
the application sees anything) are raised to ``DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE``
(4 × ``NETA_WS_MAX_FRAME_BYTES``). A frame over ``NETA_WS_MAX_FRAME_BYTES`` but
under that bound reaches the gateway, which answers ``frame_too_large`` and keeps
the socket open; only a frame over the bound closes it (1009, "message too big").
Options given on the command line win. ``manage.py runserver`` (Daphne's) reads
the same settings.
"""

from __future__ import annotations

import os
import sys


def daphne_argv(argv: list[str]) -> list[str]:
    """Daphne's arguments: the configured websocket limits, then ``argv`` (later options win)."""
    from django.conf import settings

    return [
        "--websocket-max-message-size",
        str(settings.DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE),
        "--websocket-max-frame-size",
        str(settings.DAPHNE_WEBSOCKET_MAX_FRAME_SIZE),
        *argv,
    ]


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "neta.settings")
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(daphne_argv(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
