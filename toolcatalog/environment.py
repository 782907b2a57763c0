"""The environment a tool's command gets, and which variables a configuration may name.

Two rules live here, and only here:

* **Names no configuration may read** (:func:`server_setting_reason`): the server's own
  settings and secrets — ``NETA_*``, ``DJANGO_*``, ``CELERY_*``, anything naming a database
  URL or DSN, a Redis or broker URL, a secret key or a password, and the ``*_FILE`` form of
  any of those. A model's key variable, an MCP server's ``env_names``, an agent's
  ``env_passthrough``, the web search key and the subagent launcher all refuse them: when a
  row is saved (a form error, a 400) and again when it is used (a row stored earlier
  leaks nothing either).
* **Names tools may not be handed** (:func:`tool_variable_reason`): the above, plus every
  provider key the server itself uses (a model's key variable, the web search key). A key
  goes to the endpoint its model names and nowhere else; a tool that needs a key of its own
  gets a variable of its own. The names in use are supplied by the app that knows them
  (:func:`set_key_names`): the runtime registers its models' key variables, the web search
  backend its key, a subagent child its own model's.

Besides, a tool's command never sees secret-looking variables (``*_API_KEY``, ``*_TOKEN*``,
the patterns of :data:`SECRET_NAME_PATTERNS`) unless an agent's policy passes one through by
name (``env_passthrough``) — and a name the rules above refuse never passes.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping

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

#: The server's own settings and secrets (case-insensitive, shell-style), with what each is.
SERVER_SETTING_PATTERNS: tuple[tuple[str, str], ...] = (
    ("NETA_*", "a Neta setting"),
    ("DJANGO_*", "a Django setting"),
    ("CELERY_*", "a Celery setting"),
    ("*DATABASE*", "a database setting"),
    ("*DB_URL*", "a database URL"),
    ("DSN", "a database DSN"),
    ("*_DSN", "a DSN"),
    ("*REDIS_URL*", "a Redis URL"),
    ("*BROKER_URL*", "a broker URL"),
    ("*SECRET_KEY*", "a secret key"),
    ("*PASSWORD*", "a password"),
    ("*PASSWD*", "a password"),
    ("MYSQL_PWD", "a database password"),
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Set for every command so pagers and colour codes do not get in the way.
COMMAND_DEFAULTS: dict[str, str] = {"PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb", "NO_COLOR": "1"}

_key_sources: dict[str, Callable[[], Mapping[str, str]]] = {}


def is_valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_NAME_PATTERNS)


def server_setting_reason(name: str) -> str | None:
    """Why no configuration may read the variable ``name`` (``None``: it may). The ``*_FILE``
    form of a refused name (``NETA_SECRET_KEY_FILE``, ``DATABASE_URL_FILE``) is refused too."""
    upper = name.upper()
    stems = [upper, upper[: -len("_FILE")]] if upper.endswith("_FILE") else [upper]
    for stem in stems:
        for pattern, what in SERVER_SETTING_PATTERNS:
            if fnmatch.fnmatchcase(stem, pattern):
                return f"{name} is {what} of the server ({pattern}): no configuration may read it"
    return None


def set_key_names(source: str, provider: Callable[[], Mapping[str, str]] | None) -> None:
    """Register (or, with ``None``, forget) who knows some of the provider keys in use:
    ``provider()`` maps each key variable to what uses it (``"the API key of model 'claude'"``)."""
    if provider is None:
        _key_sources.pop(source, None)
    else:
        _key_sources[source] = provider


def key_names() -> Mapping[str, str]:
    """The provider key variables in use (name → what uses it), from every registered source."""
    found: dict[str, str] = {}
    for provider in list(_key_sources.values()):
        for name, use in provider().items():
            found.setdefault(name, use)
    return found


def tool_variable_reason(name: str, *, keys: Mapping[str, str] | None = None) -> str | None:
    """Why ``name`` may not be handed to a tool (an agent's ``env_passthrough``, an MCP
    server's ``env_names``): a server setting, or a provider key the server uses."""
    reason = server_setting_reason(name)
    if reason:
        return reason
    used = (key_names() if keys is None else keys).get(name)
    if used:
        return f"{name} is {used}: a provider key goes to its model's endpoint only (give the tool a variable of its own)"
    return None


def scrub_environment(
    source: Mapping[str, str], *, passthrough: Iterable[str] = (), defaults: Mapping[str, str] = COMMAND_DEFAULTS
) -> dict[str, str]:
    """A copy of ``source`` without secret-looking variables, the server's settings and the
    provider keys in use, except those in ``passthrough`` that the rules allow
    (:func:`tool_variable_reason`): a refused name never crosses, whoever listed it and whenever."""
    keys = key_names()
    allowed = {name for name in passthrough if tool_variable_reason(name, keys=keys) is None}
    env = {}
    for name, value in source.items():
        if name in allowed or not (is_secret_name(name) or name in keys or server_setting_reason(name)):
            env[name] = value
    for name, value in defaults.items():
        env.setdefault(name, value)
    return env
