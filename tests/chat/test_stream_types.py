"""The chat store knows exactly the streaming event types the server sends.

``runtime.realtime.sinks.STREAM_EVENT_TYPES`` is the Python list; the chat page's is
the ``STREAM_EVENT_TYPES`` a module under ``static/chat/`` exports. Node imports
that module and prints the set, so the test reads the value the browser uses,
not a guess at the source text. A type added on one side only fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from runtime.realtime.sinks import STREAM_EVENT_TYPES
from tests.conftest import REPO, require

CHAT = REPO / "static" / "chat"
PRINT = "const m = await import(process.argv[1]); console.log(JSON.stringify([...m.STREAM_EVENT_TYPES]));"


def js_modules_declaring_stream_types() -> list:
    declares = re.compile(r"^export const STREAM_EVENT_TYPES\b", re.M)
    return sorted(p for p in CHAT.glob("*.js") if declares.search(p.read_text(encoding="utf-8")))


def js_stream_types(module) -> list[str]:
    require(shutil.which("node") is not None, "node is not installed")
    out = subprocess.run(
        ["node", "--input-type=module", "-e", PRINT, module.as_uri()], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_chat_store_declares_the_list_once():
    modules = js_modules_declaring_stream_types()
    assert [p.name for p in modules] == ["store.js"]


def test_chat_store_stream_types_equal_the_python_ones():
    types = js_stream_types(CHAT / "store.js")
    assert len(types) == len(set(types))
    assert set(types) == set(STREAM_EVENT_TYPES), {
        "only in the chat store": sorted(set(types) - STREAM_EVENT_TYPES),
        "only in runtime.realtime.sinks": sorted(STREAM_EVENT_TYPES - set(types)),
    }
