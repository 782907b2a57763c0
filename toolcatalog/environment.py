"""The environment a tool's command gets: the server's, minus its secrets.

Variables whose names look like configuration or credentials of the server are
removed (``NETA_*``, ``DJANGO_*``, ``*_API_KEY``, ``*_SECRET*``, ``*_TOKEN*`` and
the further patterns below). An agent's policy may pass a named variable through
explicitly (``env_passthrough``); nothing else crosses.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

#: Name patterns (case-insensitive, shell-style) of variables never handed to tools.
SECRET_NAME_PATTERNS: tuple[str, ...] = (
    "NETA_*",
    "DJANGO_*",
    "*_API_KEY",
    "*API_KEY*",
    "*_SECRET*",
    "SECRET*",
    "*_TOKEN*",
    "TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*_PRIVATE_KEY*",
    "*_ACCESS_KEY*",
    "*COOKIE*",
    "*_DSN",
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "KUBECONFIG",
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Set for every command so pagers and colour codes do not get in the way.
COMMAND_DEFAULTS: dict[str, str] = {"PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb", "NO_COLOR": "1"}


def is_valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_NAME_PATTERNS)


def scrub_environment(
    source: Mapping[str, str], *, passthrough: Iterable[str] = (), defaults: Mapping[str, str] = COMMAND_DEFAULTS
) -> dict[str, str]:
    """A copy of ``source`` without secret-looking variables, except those in ``passthrough``."""
    allowed = set(passthrough)
    env = {}
    for name, value in source.items():
        if name in allowed or not is_secret_name(name):
            env[name] = value
    for name, value in defaults.items():
        env.setdefault(name, value)
    return env
