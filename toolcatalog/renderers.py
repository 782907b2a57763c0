"""The chat page's tool-card renderer keys, read from the file the page's registry is checked
against (static/chat/components/tool_renderers.json): a governance row may only name one of them."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from django.conf import settings

KEYS_FILE = Path("static") / "chat" / "components" / "tool_renderers.json"


@lru_cache(maxsize=1)
def renderer_keys() -> frozenset[str]:
    data = json.loads((Path(settings.BASE_DIR) / KEYS_FILE).read_text(encoding="utf-8"))
    return frozenset(data["keys"])
