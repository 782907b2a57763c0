"""The cyclic garbage collector, set for a long-lived server process.

Python's defaults (a young-generation pass every 700 new container objects, an
older pass every 10 of those) suit short scripts. A server allocates fast (an ORM
query, a JSON event, a websocket frame), keeps little of it, and holds a large,
stable heap from its start (Django, the apps, the imported libraries): at the
defaults a 50-session load spent ~6 ms of CPU a turn in the collector, and every
full pass walked the whole startup heap again (~150 ms with the process stopped).

``tune()`` — the server (``neta.serve``) and each Celery worker process call it
once they are set up — moves everything alive at that moment into the permanent
generation (``gc.freeze``: never walked again, and in a forked worker child not
touched, so its pages stay shared), and raises the young threshold to
``NETA_GC_YOUNG`` (older generations every 20 of the one below). Reference counting
frees almost everything as before; only garbage cycles wait a little longer.
``NETA_GC_YOUNG=0`` leaves the collector as Python sets it.
"""

from __future__ import annotations

import gc

from django.conf import settings

OLDER_EVERY = 20


def tune() -> tuple[int, int, int] | None:
    """Freeze the startup heap and set the thresholds; returns them (None: left alone)."""
    young = settings.NETA_GC_YOUNG
    if not young:
        return None
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, OLDER_EVERY, OLDER_EVERY)
    return gc.get_threshold()
