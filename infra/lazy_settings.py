"""``django.conf.settings``, imported at the first attribute read.

The subagent child imports the tool catalog's sandbox and protected paths before its run
starts; importing ``django.conf`` there would bring Django, asyncio and ssl into every
child's start-up (tests/subagents/test_child_process.py keeps that start-up light). Modules
on that path read settings through this object instead; everything else imports
``django.conf.settings`` as usual.
"""

from __future__ import annotations

from typing import Any


class LazySettings:
    def __getattr__(self, name: str) -> Any:
        from django.conf import settings  # first read: see the module docstring

        return getattr(settings, name)


settings = LazySettings()
