"""The chat page knows exactly the event types and fields the server sends.

``runtime.realtime.stream_events`` and ``sessions_tree.tree_events`` declare every
streaming and tree event type and the keys each carries; the chat page's twins are
``STREAM_EVENT_FIELDS``/``STREAM_EVENT_TYPES`` (``static/chat/store.js``) and
``TREE_EVENT_FIELDS``/``TREE_EVENT_TYPES`` (``static/chat/tree_events.js``). Node imports
those modules and prints the values, so the test reads what the browser uses, not a
guess at the source text. A type or a field added, removed or renamed on one side
only fails here; so does a field the page reads (``event.<name>``) that no event
declares. That the server's events fit the Python declarations is checked where they
are made (``tests/sessions_tree/test_events.py``, ``tests/runtime/test_event_shapes.py``)
and here for the committed store fixtures both sides replay.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from runtime.realtime import stream_events
from runtime.realtime.sinks import STREAM_EVENT_TYPES
from sessions_tree import tree_events
from tests.support.services import REPO, require

CHAT = REPO / "static" / "chat"
PRINT = "const m = await import(process.argv[1]); console.log(JSON.stringify(m[process.argv[2]], (k, v) => v instanceof Set ? [...v] : v));"


def js_modules_declaring(name: str) -> list:
    declares = re.compile(rf"^export const {name}\b", re.M)
    return sorted(p for p in CHAT.rglob("*.js") if declares.search(p.read_text(encoding="utf-8")))


def js_value(module, name: str):
    require(shutil.which("node") is not None, "node is not installed")
    out = subprocess.run(
        ["node", "--input-type=module", "-e", PRINT, module.as_uri(), name], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def as_sets(fields: dict) -> dict:
    return {kind: {"required": set(f.get("required", ())), "optional": set(f.get("optional", ()))} for kind, f in fields.items()}


def differences(js: dict, py: dict) -> dict:
    """Per type: the keys only one side declares (an empty dict when they agree)."""
    out = {}
    for kind in sorted(set(js) | set(py)):
        if kind not in js or kind not in py:
            out[kind] = "only in " + ("the chat page" if kind in js else "Python")
            continue
        for part in ("required", "optional"):
            only_js, only_py = js[kind][part] - py[kind][part], py[kind][part] - js[kind][part]
            if only_js or only_py:
                out[f"{kind}.{part}"] = {"only in the chat page": sorted(only_js), "only in Python": sorted(only_py)}
    return out


# --------------------------------------------------------------------------- the lists of types


@pytest.mark.parametrize(
    "name, module",
    [("STREAM_EVENT_TYPES", "store.js"), ("STREAM_EVENT_FIELDS", "store.js"), ("TREE_EVENT_TYPES", "tree_events.js"), ("TREE_EVENT_FIELDS", "tree_events.js")],
)
def test_the_chat_page_declares_each_list_once(name, module):
    assert [p.name for p in js_modules_declaring(name)] == [module]


def test_chat_store_stream_types_equal_the_python_ones():
    types = js_value(CHAT / "store.js", "STREAM_EVENT_TYPES")
    assert len(types) == len(set(types))
    assert set(types) == set(STREAM_EVENT_TYPES), {
        "only in the chat store": sorted(set(types) - STREAM_EVENT_TYPES),
        "only in runtime.realtime.stream_events": sorted(STREAM_EVENT_TYPES - set(types)),
    }


def test_chat_tree_event_types_equal_the_python_ones():
    types = js_value(CHAT / "tree_events.js", "TREE_EVENT_TYPES")
    assert len(types) == len(set(types))
    assert set(types) == set(tree_events.TREE_EVENT_TYPES), {
        "only in the chat page": sorted(set(types) - tree_events.TREE_EVENT_TYPES),
        "only in sessions_tree.tree_events": sorted(tree_events.TREE_EVENT_TYPES - set(types)),
    }


# --------------------------------------------------------------------------- the fields of each type


def test_chat_store_stream_event_fields_equal_the_python_ones():
    js = as_sets(js_value(CHAT / "store.js", "STREAM_EVENT_FIELDS"))
    assert differences(js, as_sets(stream_events.STREAM_EVENT_FIELDS)) == {}


def test_chat_tree_event_fields_equal_the_python_ones():
    js = as_sets(js_value(CHAT / "tree_events.js", "TREE_EVENT_FIELDS"))
    assert differences(js, as_sets(tree_events.TREE_EVENT_FIELDS)) == {}


def test_a_renamed_field_is_a_difference():
    """The comparison itself: one key renamed on one side is reported on both parts."""
    py = as_sets(stream_events.STREAM_EVENT_FIELDS)
    js = as_sets(stream_events.STREAM_EVENT_FIELDS)
    js["tool_result_streamed"]["required"] = (js["tool_result_streamed"]["required"] - {"toolCallId"}) | {"toolCallID"}
    assert differences(js, py) == {
        "tool_result_streamed.required": {"only in the chat page": ["toolCallID"], "only in Python": ["toolCallId"]}
    }


# Where the chat page reads event fields: (file, the name the event has there, which events).
READERS = [
    ("store.js", "event", "both"),  # _treeEvent and _streamEvent
    ("streaming.js", "event", "stream"),  # liveApplyStream
    ("tree_events.js", "event", "tree"),  # applyEvent
    ("components/status.js", "stats", "stream"),  # the last session_context_stats
    ("subagents.js", "event", "stream"),  # applySubagentStream (a child's own events are `ce` there)
]


def fields_read(text: str, name: str) -> set[str]:
    """``name.field``, ``name?.field`` and ``"field" in name`` in ``text``."""
    dotted = re.findall(rf"\b{name}\??\.([A-Za-z_$][\w$]*)", text)
    tested = re.findall(rf"[\"'](\w+)[\"']\s+in\s+{name}\b", text)
    return set(dotted) | set(tested)


def declared(which: str) -> set[str]:
    fields = {
        "stream": stream_events.STREAM_EVENT_FIELDS,
        "tree": tree_events.TREE_EVENT_FIELDS,
        "both": {**stream_events.STREAM_EVENT_FIELDS, **tree_events.TREE_EVENT_FIELDS},
    }[which]
    return {key for f in fields.values() for key in (*f["required"], *f["optional"])}


@pytest.mark.parametrize("path, name, which", READERS)
def test_every_field_the_chat_page_reads_is_declared(path, name, which):
    read = fields_read((CHAT / path).read_text(encoding="utf-8"), name)
    assert read, f"{path} reads no {name}.<field>: the list of readers is out of date"
    assert sorted(read - declared(which)) == []


def test_the_reader_scan_sees_a_renamed_field():
    assert fields_read('x = event.toolCallID ?? event?.text; if ("context" in event) y = stats?.tokens;', "event") == {
        "toolCallID",
        "text",
        "context",
    }


# --------------------------------------------------------------------------- what both sides replay


def test_the_committed_store_fixtures_fit_the_declarations():
    """The tree events the browser and Python replay in their fixture tests
    (``tests/fixtures/store``, generated from real provider operations)."""
    paths = sorted((REPO / "tests" / "fixtures" / "store").glob("*.json"))
    assert paths
    seen = set()
    for path in paths:
        for event in json.loads(path.read_text(encoding="utf-8"))["events"]:
            assert tree_events.shape_errors(event) == [], path.name
            seen.add(event["type"])
    assert seen == tree_events.TREE_EVENT_TYPES
