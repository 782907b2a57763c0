"""Where each provider key goes: the models that name a key variable, and their endpoints.

A key variable is sent only to the endpoint of the models that name it, and those must all
point at one origin (``ModelConfig.key_conflicts`` refuses a save that would split them).
This module answers the same question at use time, for rows stored before that rule or
written around the services: a key whose models point at two origins is sent to neither
(:func:`key_refusal`). It also tells the tool catalog which variables are provider keys,
so that no tool is ever handed one (``toolcatalog.environment.set_key_names``).

Both answers come from one read of the models, reused for a few seconds.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections import defaultdict

from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError, connection

from infra.memo import recent
from runtime.llm.clients import endpoint_origin
from runtime.models import LlmProviderKind, ModelConfig
from toolcatalog.environment import server_setting_reason

logger = logging.getLogger(__name__)
REUSE_SECONDS = 5.0
_memory: dict = {}


def _read() -> dict[str, dict[tuple, list[str]]]:
    rows = (
        ModelConfig.objects.exclude(api_key_env="")
        .exclude(provider_kind=LlmProviderKind.SCRIPTED)
        .values_list("api_key_env", "name", "provider_kind", "base_url")
    )
    found: dict[str, dict[tuple, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key, name, kind, base_url in rows:
        endpoint = ModelConfig(provider_kind=kind, base_url=base_url).endpoint
        found[key][endpoint_origin(endpoint)].append(name)
    return {key: dict(origins) for key, origins in found.items()}


def _read_anywhere() -> dict[str, dict[tuple, list[str]]]:
    try:
        return _read()
    except SynchronousOnlyOperation:
        # Asked from an event loop (an MCP server starting): read on a thread of its own.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_read_and_close).result()


def _read_and_close():
    try:
        return _read()
    finally:
        connection.close()


def key_endpoints() -> dict[str, dict[tuple, list[str]]]:
    """Key variable → {endpoint origin → names of the models sending it there}."""
    return recent(_memory, "keys", REUSE_SECONDS, _read_anywhere)


def forget() -> None:
    """Read the models again at the next question (a test changed them)."""
    _memory.clear()


def key_refusal(model: ModelConfig) -> str | None:
    """Why ``model``'s key may not be sent to its endpoint now (``None``: it may)."""
    name = model.api_key_env
    if not name:
        return None
    refused = server_setting_reason(name)
    if refused:
        return f"model {model.name!r}: its key variable is refused ({refused})"
    mine = endpoint_origin(model.endpoint)
    others = _elsewhere(key_endpoints(), name, mine, model.name)
    if others:  # the reused answer may be a few seconds old: a refusal is made on a fresh read
        forget()
        others = _elsewhere(key_endpoints(), name, mine, model.name)
    if others:
        return (
            f"model {model.name!r}: {name} is named by models pointing at other endpoints ({'; '.join(others)}); "
            "a key is sent to one endpoint only: point them at one endpoint, or give each its own variable"
        )
    return None


def _elsewhere(endpoints: dict, name: str, mine: tuple, model_name: str) -> list[str]:
    """The other models sending the key ``name`` to an origin other than ``mine``."""
    found = []
    for origin, names in endpoints.get(name, {}).items():
        others = [n for n in names if n != model_name]
        if origin != mine and others:
            found.append(f"{', '.join(others)} at {origin[0]}://{origin[1]}:{origin[2]}")
    return sorted(found)


def tool_key_names() -> dict[str, str]:
    """The provider keys in use, for the tool catalog (name → what uses it). Where the models
    cannot be read (no database in this process), none: the secret-looking names
    (``*_API_KEY``…) are still kept from tools, and the saves refused the rest."""
    try:
        endpoints = key_endpoints()
    except (DatabaseError, RuntimeError) as exc:
        logger.debug("provider key names not read: %s", exc)
        return {}
    return {key: f"the API key of model {sorted(n for names in origins.values() for n in names)[0]!r}" for key, origins in endpoints.items()}
