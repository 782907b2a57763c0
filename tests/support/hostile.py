"""Hostile Pi files and stored-bad sessions, shared by the kernel and API tests.

``HOSTILE_HEADERS``: header fields that must never reach a path or a column.
``BAD_CONTENT``: entry lines Neta would never write (lone surrogates, numbers
that overflow, ``NaN``, parent cycles, a missing parent, wrong types, deep
nesting). :func:`store_behind_back` puts such lines into a session *behind the
provider's back* (the file rewritten, the rows' payloads replaced), the way a
hand edit, another tool or an older version could have left them.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from sessions_tree import jsonl
from sessions_tree.clean import clean_value
from sessions_tree.index import INDEXES
from sessions_tree.models import AgentSession, SessionEntry
from sessions_tree.pi_files import import_session_file

TS = "2025-06-02T09:14:05.120Z"


def header_line(**fields) -> str:
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": TS, "cwd": "/work/p", **fields}
    return json.dumps(header)


def user(id: str, parent, text: str) -> str:
    """A user message line; ``text`` goes in as JSON string content (``\\ud800`` is an escape)."""
    return jsonl.dumps(
        {"type": "message", "id": id, "parentId": parent, "timestamp": TS,
         "message": {"role": "user", "content": [{"type": "text", "text": "@@TEXT@@"}], "timestamp": 1}}
    ).replace("@@TEXT@@", text)  # fmt: skip


def assistant(id: str, parent, text: str, *, cost: object = 0.001) -> dict:
    return {
        "type": "message", "id": id, "parentId": parent, "timestamp": TS,
        "message": {
            "role": "assistant", "content": [{"type": "text", "text": text}], "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-test",
            "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}},
            "stopReason": "stop", "timestamp": 2,
        },
    }  # fmt: skip


def deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = {"d": value}
    return value


# Header fields that must be refused: (header overrides, the field named in the error).
def hostile_headers(tag: str) -> dict[str, tuple[dict, str]]:
    return {
        "id-traversal-up": ({"id": f"/../../../../tmp/{tag}"}, "header.id"),
        "id-traversal-down": ({"id": f"{tag}/../../.."}, "header.id"),
        "id-absolute": ({"id": f"/tmp/{tag}"}, "header.id"),
        "id-backslash": ({"id": f"..\\..\\{tag}"}, "header.id"),
        "id-dotdot": ({"id": ".."}, "header.id"),
        "id-nul": ({"id": f"{tag}\u0000x"}, "header.id"),
        "id-overlong": ({"id": "a" * 65}, "header.id"),
        "id-empty": ({"id": ""}, "header.id"),
        "id-trailing-space": ({"id": f"{tag} "}, "header.id"),
        "id-fullwidth-solidus": ({"id": f"{tag}\uff0f..\uff0fx"}, "header.id"),
        "id-rtl-override": ({"id": f"{tag}\u202egpj"}, "header.id"),
        "timestamp-slash": ({"timestamp": "a/"}, "header.timestamp"),
        "timestamp-traversal": ({"timestamp": f"../../../../tmp/{tag}"}, "header.timestamp"),
        "timestamp-absolute": ({"timestamp": f"/tmp/{tag}"}, "header.timestamp"),
        "timestamp-nul": ({"timestamp": "2025\u0000"}, "header.timestamp"),
        "timestamp-overlong": ({"timestamp": "2" * 300}, "header.timestamp"),
        "timestamp-number": ({"timestamp": 1717}, "header.timestamp"),
        "timestamp-object": ({"timestamp": {"a": 1}}, "header.timestamp"),
        "cwd-number": ({"cwd": 5}, "header.cwd"),
        "cwd-list": ({"cwd": ["/a"]}, "header.cwd"),
        "cwd-nul": ({"cwd": "/work/\u0000x"}, "header.cwd"),
        "cwd-overlong": ({"cwd": "/x" * 3000}, "header.cwd"),
        "parent-number": ({"parentSession": 7}, "header.parentSession"),
        "parent-nul": ({"parentSession": "a\u0000b"}, "header.parentSession"),
        "parent-overlong": ({"parentSession": "p" * 5000}, "header.parentSession"),
    }


def hostile_file(path: Path, overrides: dict) -> Path:
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": TS, "cwd": "/work/p", **overrides}
    path.write_text(json.dumps(header) + "\n" + user("a1", None, "hello") + "\n")
    return path


# Entry lines Neta never writes. Each case: the lines after the header, as text.
def bad_content() -> dict[str, list[str]]:
    ok = user("u1", None, "hello")
    return {
        "lone-surrogate-text": [ok, user("u2", "u1", "bad \\ud800 char"), jsonl.dumps(assistant("a1", "u2", "@")).replace("@", "x\\udfffy")],
        "lone-surrogate-key-and-id": [
            ok,
            '{"type":"custom","customType":"x","data":{"\\udc00k":"\\ud800"},"id":"c\\ud800","parentId":"u1","timestamp":"%s"}' % TS,
            jsonl.dumps(assistant("a1", "u1", "after")),
        ],
        "overflow-number": [ok, jsonl.dumps(assistant("a1", "u1", "x")).replace('"total":0.001', '"total":1e400')],
        "nan-literal": [ok, jsonl.dumps(assistant("a1", "u1", "x")).replace('"total":0.001', '"total":NaN'), user("u2", "a1", "next")],
        "cycle": [ok, user("u2", "u3", "loops"), user("u3", "u2", "loops back")],
        "self-parent": [ok, user("u2", "u2", "my own parent")],
        "missing-parent": [ok, user("u2", "nobody", "orphan")],
        "cost-total-string": [ok, jsonl.dumps(assistant("a1", "u1", "x", cost="free"))],
        "usage-string": [ok, jsonl.dumps(assistant("a1", "u1", "x")).replace(jsonl.dumps(assistant("a1", "u1", "x")["message"]["usage"]), '"lots"')],
        "wrong-types": [
            ok,
            '{"type":"message","id":"m1","parentId":"u1","timestamp":{},"message":"not a message"}',
            '{"type":"message","id":"m2","parentId":"m1","timestamp":5,"message":{"role":7,"content":5}}',
            '{"type":"message","id":"m3","parentId":"m2","timestamp":null,"message":{"role":"assistant","content":"text","usage":[],"stopReason":{}}}',
            '{"type":"message","id":"m4","parentId":"m3","message":{"role":"toolResult","content":[{"type":"image"}],"toolCallId":5}}',
            '{"type":"compaction","id":"k1","parentId":"m4","summary":7,"firstKeptEntryId":5,"tokensBefore":"many"}',
            '{"type":"branch_summary","id":"b1","parentId":"k1","summary":["x"],"fromId":null}',
            '{"type":"label","id":"l1","parentId":"b1","targetId":{},"label":5}',
            '{"type":"session_info","id":"s1","parentId":"l1","name":5}',
            '{"type":"model_change","id":"mc","parentId":"s1","provider":5,"modelId":null}',
            '{"type":"thinking_level_change","id":"t1","parentId":"mc","thinkingLevel":[]}',
            '{"type":"custom_message","id":"cm","parentId":"t1","customType":5,"content":{"a":1},"display":"yes"}',
            user("u9", "cm", "still here"),
        ],
        "deep-nesting": [ok, jsonl.dumps({"type": "custom", "customType": "deep", "data": deep(1500), "id": "d1", "parentId": "u1", "timestamp": TS}), user("u2", "d1", "below the deep one")],
    }


def _twin(line: str) -> str | None:
    """What Neta would have stored for ``line`` (None: a line Pi skips)."""
    try:
        value = jsonl.loads(line)
    except ValueError:
        return None
    return jsonl.dumps(clean_value(value))


def store_behind_back(provider, tmp_path: Path, lines: list[str]) -> str:
    """A session of ``provider`` whose stored lines are exactly ``lines`` (returns its id).

    It is imported from what Neta would have stored; then the file (file
    provider) or the rows' payloads (mysql) are replaced by the hostile text,
    with the meta row left as the import made it (sizes brought in line, so
    the provider sees no crash to recover from).
    """
    head = header_line()
    twins = [(_twin(line) or json.dumps({"type": "custom", "customType": "placeholder", "id": f"x{i}", "parentId": None, "timestamp": TS}), line)
             for i, line in enumerate(lines)]  # fmt: skip
    source = tmp_path / f"twin-{uuid.uuid4().hex[:8]}.jsonl"
    source.write_text(head + "\n" + "".join(t + "\n" for t, _ in twins))
    meta = import_session_file(source, provider_kind=provider.kind, using=provider.using)
    if provider.kind == "file":
        path = Path(meta.session_file)
        header_text = path.read_text().split("\n", 1)[0]
        data = (header_text + "\n" + "".join(line + "\n" for _, line in twins)).encode("utf-8")
        path.write_bytes(data)
        os.sync()
        AgentSession.objects.using(provider.using).filter(pk=meta.pk).update(last_seq=len(data))
    else:
        rows = list(SessionEntry.objects.using(provider.using).filter(session_id=meta.pk).order_by("seq"))
        for row, (_, line) in zip(rows, twins):
            SessionEntry.objects.using(provider.using).filter(pk=row.pk).update(payload=line)
    INDEXES.clear()
    return meta.session_id
