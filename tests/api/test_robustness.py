"""No input makes the API answer 5xx: deep JSON, lone surrogates, hand-made
cursors, every route × method × actor × body, and stored content JSON-over-UTF-8
cannot carry."""

from __future__ import annotations

import base64
import json

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from runtime.api.parsers import MAX_JSON_DEPTH, check_json, loads
from runtime.api.renderers import SafeJSONRenderer
from runtime.api.tokens import api_token_create
from runtime.encodable import TOO_DEEP, renderable
from runtime.models import AgentRun
from sessions_tree.models import AgentSession
from tests.support.builders import build_tree

DEEP = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000


def client(user=None) -> APIClient:
    c = APIClient(raise_request_exception=False)
    if user is not None:
        c.force_login(user)
    return c


def error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert body["error"]["code"] == code, body
    if field is not None:
        assert field in body["error"].get("fields", {}), body
    return body["error"]


# --------------------------------------------------------------------------- the JSON body


def json_endpoints(session_id: str) -> list[tuple[str, str]]:
    s = f"/api/sessions/{session_id}/"
    return [
        ("post", "/api/sessions/"),
        ("patch", s),
        ("post", s + "prompt/"),
        ("post", s + "regenerate/"),
        ("post", s + "switch-leaf/"),
        ("post", s + "labels/"),
        ("post", s + "compact/"),
        ("post", s + "fork/"),
    ]


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT, "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)])
def test_deep_json_is_a_400_naming_the_depth_on_every_json_endpoint(tree, owner, body):
    c = client(owner)
    for method, url in json_endpoints(tree.session_id):
        response = getattr(c, method)(url, body, content_type="application/json")
        err = error(response, 400, "invalid_json", "body")
        assert str(MAX_JSON_DEPTH) in err["message"], (url, err)
    assert AgentSession.objects.count() == 1  # nothing was created


def test_json_within_the_depth_bound_still_parses():
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    value = loads(nested)
    for _ in range(MAX_JSON_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" * 5000])
def test_numbers_json_cannot_hold_are_refused(tree, owner, number):
    response = client(owner).post(f"/api/sessions/{tree.session_id}/prompt/", f'{{"text": "hi", "images": {number}}}', content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] in ("invalid_json", "parse_error"), response.content
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize(
    ("method", "suffix", "body", "field"),
    [
        ("post", "prompt/", '{"text": "hi", "mode": "\\ud800"}', "mode"),
        ("patch", "", '{"status": "\\udfff"}', "status"),
        ("post", "switch-leaf/", '{"entryId": "\\ud800", "summarize": false}', "entryId"),
        ("post", "labels/", '{"entryId": "\\ud800x", "label": "a"}', "entryId"),
        ("post", "fork/", '{"entryId": "\\ud83d"}', "entryId"),
        ("post", "prompt/", '{"text": "hi", "images": [{"mimeType": "\\ud800", "data": "AAAA"}]}', "images[0].mimeType"),
        ("post", "prompt/", '{"text": "hi", "model": "\\ud800"}', "model"),
    ],
)
def test_a_lone_surrogate_in_a_field_is_a_400_naming_it(tree, owner, method, suffix, body, field):
    response = getattr(client(owner), method)(f"/api/sessions/{tree.session_id}/{suffix}", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    err = response.json()["error"]
    assert field in err["fields"], err
    assert "\ufffd" in json.dumps(err, ensure_ascii=False) or err["code"] == "entry_not_found"


def test_a_lone_surrogate_in_text_is_replaced_and_the_request_goes_on(tree, owner):
    c = client(owner)
    response = c.post("/api/sessions/", '{"title": "a\\ud800b\\udc00c"}', content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["title"] == "a\ufffdb\ufffdc"
    # A well-formed pair is one character, as in JSON.parse.
    response = c.post("/api/sessions/", '{"title": "\\ud83d\\ude00"}', content_type="application/json")
    assert response.status_code == 201 and response.json()["title"] == "\U0001f600"
    # Keys too.
    assert check_json({"\ud800": ["\udfff", {"k\ud800": 1}]}) == {"\ufffd": ["\ufffd", {"k\ufffd": 1}]}


# --------------------------------------------------------------------------- stored content


def append_behind_the_providers_back(session_id: str, lines: list[str]) -> None:
    """Append raw JSONL lines to a session as another writer would (Pi to a file; a
    hand-made row for the mysql provider), and make the meta row acknowledge them
    (size or sequence, count, leaf = the last line's id)."""
    from pathlib import Path

    from sessions_tree.models import SessionEntry

    meta = AgentSession.objects.get(session_id=session_id)
    last_id = json.loads(lines[-1])["id"]
    if meta.provider == "file":
        path = Path(meta.session_file)
        with path.open("a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line.rstrip("\n") + "\n")
        last_seq = path.stat().st_size
    else:
        last_seq = meta.last_seq
        for line in lines:
            entry = json.loads(line)
            last_seq += 1
            SessionEntry.objects.create(
                session=meta, entry_id=entry["id"], parent_entry_id=entry.get("parentId"), seq=last_seq, type=entry["type"],
                role=(entry.get("message") or {}).get("role", ""), timestamp=entry.get("timestamp", ""), payload=line,
            )
    AgentSession.objects.filter(pk=meta.pk).update(last_seq=last_seq, entry_count=meta.entry_count + len(lines), leaf_entry_id=last_id)


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_stored_content_json_cannot_carry_still_renders(owner, agent, provider):
    """A line holding a lone surrogate and a number that overflows to Infinity (both
    accepted by JSON.parse), written behind the provider's back, on both stores."""
    agent.session_provider = provider
    agent.save()
    tree = build_tree(owner, agent)
    assert AgentSession.objects.get(session_id=tree.session_id).provider == provider
    leaf = AgentSession.objects.get(session_id=tree.session_id).leaf_entry_id
    line = (
        '{"type":"message","id":"bad00001","parentId":"%s","timestamp":"2026-01-01T00:00:00.000Z",'
        '"message":{"role":"assistant","content":[{"type":"text","text":"half \\ud800 a pair"}],'
        '"usage":{"input":1,"output":1e400,"cost":{"total":1e400}},"stopReason":"stop","timestamp":1}}' % leaf
    )
    append_behind_the_providers_back(tree.session_id, [line])
    c = client(owner)
    for url in (
        f"/api/sessions/{tree.session_id}/entries/?limit=500",
        f"/api/sessions/{tree.session_id}/snapshot/",
        f"/api/sessions/{tree.session_id}/",
        "/api/sessions/",
    ):
        response = c.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        response.content.decode("utf-8")  # valid UTF-8
    entries = c.get(f"/api/sessions/{tree.session_id}/entries/?limit=500").json()["results"]
    bad = next(e for e in entries if e["id"] == "bad00001")
    assert bad["message"]["content"][0]["text"] == "half \ufffd a pair"
    assert bad["message"]["usage"]["output"] is None  # Infinity has no JSON form
    snapshot = c.get(f"/api/sessions/{tree.session_id}/snapshot/").json()
    assert snapshot["activePath"][-1] == "bad00001"
    export = c.get(f"/api/sessions/{tree.session_id}/export/")
    assert export.status_code == 200 and b"bad00001" in b"".join(export.streaming_content)


def test_the_renderer_survives_any_value():
    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    data = {"s\ud800": "x\udfffy", "n": [float("nan"), float("inf"), 1.5], "deep": deep}
    rendered = json.loads(SafeJSONRenderer().render(data))
    assert rendered["s\ufffd"] == "x\ufffdy" and rendered["n"] == [None, None, 1.5]
    node, depth = rendered["deep"], 1
    while isinstance(node, list):
        node, depth = node[0], depth + 1
    assert node == TOO_DEEP and depth > 100
    assert renderable({"a": ("t", 1)}) == {"a": ["t", 1]}


# --------------------------------------------------------------------------- cursors


def b64(text: bytes) -> str:
    return base64.b64encode(text).decode("ascii")


BAD_CURSORS = [
    b64(b"p=2025"),  # cD0yMDI1: a year where a timestamp belongs
    b64(b"p=abc"),
    b64(b"p=2025-13-45T99:99:99"),
    b64(b"p=9999-12-31T23:59:59-14:00"),  # overflows when converted to UTC
    b64(b"p=" + b"9" * 40),  # a number no column holds
    b64(b"p=-" + b"9" * 40),
    b64(b"p=1e400"),
    b64(b"p=%00"),
    b64(b"o=-5"),
    b64(b"o=abc"),
    b64(b"r=2x"),
    b64(b"\xff\xfe\x00"),  # not UTF-8
    b64("p=ü".encode()),  # not ASCII
    "garbage",
    "%%%",
    "cD0yMDI1" * 500,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_hand_made_cursors_are_a_400(tree, agent, owner, staff, cursor):
    AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p")
    for user in (owner, staff):
        c = client(user)
        for url in ("/api/sessions/", "/api/runs/", "/api/skills/", "/api/agents/", "/api/models/"):
            response = c.get(url, {"cursor": cursor})
            assert response.status_code in (200, 400), (url, cursor, response.status_code, response.content[:300])
            if response.status_code == 400:
                error(response, 400, "invalid_cursor", "cursor")


@pytest.mark.parametrize("cursor", [b64(b"p=2025"), b64(b"p=abc"), b64(b"o=-5"), "garbage"])
def test_typed_lists_refuse_positions_of_the_wrong_type(tree, owner, cursor):
    c = client(owner)
    for url in ("/api/sessions/", "/api/runs/"):
        error(c.get(url, {"cursor": cursor}), 400, "invalid_cursor", "cursor")


def test_cursors_the_server_made_still_work(owner, agent):
    for _ in range(3):
        build_tree(owner, agent)
    c = client(owner)
    first = c.get("/api/sessions/", {"limit": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = c.get(first["next"]).json()
    assert len(second["results"]) == 1
    assert {r["sessionId"] for r in first["results"]}.isdisjoint(r["sessionId"] for r in second["results"])
    back = c.get(second["previous"]).json()
    assert [r["sessionId"] for r in back["results"]] == [r["sessionId"] for r in first["results"]]


def test_entries_and_events_cursors_are_bounded(tree, owner):
    c = client(owner)
    huge = "9" * 30
    error(c.get(f"/api/sessions/{tree.session_id}/entries/", {"cursor": huge}), 400, "invalid", "cursor")
    error(c.get(f"/api/sessions/{tree.session_id}/events/", {"sinceRevision": huge}), 400, "invalid", "sinceRevision")


# --------------------------------------------------------------------------- every route, method, actor and body


def api_routes() -> list[tuple[str, dict]]:
    """(url name in the api namespace, the kwargs it needs) for every named /api/ route."""
    found = []

    def walk(patterns, namespace):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, p.namespace or namespace)
            elif isinstance(p, URLPattern) and namespace == "api" and p.name:
                found.append((p.name, sorted(p.pattern.regex.groupindex)))

    walk(get_resolver().url_patterns, None)
    return found


METHODS = ["get", "head", "options", "post", "put", "patch", "delete"]  # delete last: it removes the session
BODIES = {
    "empty": b"",
    "garbage": b"\xff\x00{not json",
    "deep": DEEP.encode(),
    "surrogates": b'{"text": "\\ud800", "title": "\\udfff", "mode": "\\ud800", "entryId": "\\ud800", "status": "\\ud800", "agent": "\\ud800"}',
}


def bodies_for(method: str):
    """The bodies each request of the walk carries: every body in both content types where the
    method has one; where it has none (a handler that reads one anyway still must not fail),
    garbage in each content type and an empty JSON body."""
    if method in ("post", "put", "patch"):
        return [(name, body, kind) for name, body in BODIES.items() for kind in CONTENT_TYPES]
    return [("empty", BODIES["empty"], CONTENT_TYPES[0])] + [("garbage", BODIES["garbage"], kind) for kind in CONTENT_TYPES]


CONTENT_TYPES = ("application/json", "multipart/form-data; boundary=x")


def test_no_route_method_actor_or_body_answers_5xx(owner, staff, agent, tmp_path):
    routes = api_routes()
    names = {name for name, _ in routes}
    assert {"session-list", "session-detail", "session-prompt", "docs", "schema", "run-list", "agent-tools"} <= names, names
    failures = []
    count = 0
    for actor in ("anonymous", "user", "staff"):
        user = {"anonymous": None, "user": owner, "staff": staff}[actor]
        tree = build_tree(owner, agent)
        run = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p", status="completed")
        token = api_token_create(user=owner, name="robustness").token
        values = {"session_id": tree.session_id, "run_id": str(run.run_id), "name": "default", "pk": "1", "token_id": token.pk, "share_id": 1}
        urls = [reverse(f"api:{name}", kwargs={k: values[k] for k in kwargs}) for name, kwargs in routes]
        urls.append("/api/no-such-endpoint/")
        c = client(user)
        for method in METHODS:
            for url in urls:
                for body_name, body, content_type in bodies_for(method):
                    response = c.generic(method.upper(), url, data=body, content_type=content_type)
                    count += 1
                    if response.status_code >= 500:
                        failures.append((actor, method, url, body_name, content_type, response.status_code, response.content[:200]))
        for url in urls:  # every query parameter any list takes, with values no one should send
            for query in GARBAGE_QUERIES:
                response = c.get(url + "?" + query)
                count += 1
                if response.status_code >= 500:
                    failures.append((actor, "get", url, query, response.status_code, response.content[:200]))
    assert count > 1000
    assert not failures, failures[:10]


_PARAMS = ["cursor", "limit", "status", "user", "agent", "session", "sinceRevision", "format"]
GARBAGE_QUERIES = [
    "&".join(f"{name}={value}" for name in _PARAMS)
    for value in ["%00", "%ED%A0%80", "%FF%FE", "-1", "9" * 40, "1e400", "NaN", "x" * 5000, "%5B%5D", ""]
]


def test_a_recursion_error_anywhere_is_a_400_not_a_500():
    from runtime.api.errors import api_exception_handler

    response = api_exception_handler(RecursionError("maximum recursion depth exceeded"), {})
    assert response.status_code == 400 and response.data["error"]["code"] == "too_deep"


def test_what_escapes_every_handler_is_still_json_under_the_api(rf):
    from runtime.api.errors import server_error

    response = server_error(rf.get("/api/sessions/"))
    assert response.status_code == 500 and json.loads(response.content)["error"]["code"] == "server_error"
    page = server_error(rf.get("/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_a_write_to_an_unknown_path_is_a_404_in_the_one_shape_with_csrf_checked(owner):
    """Django's CSRF check runs on views DRF does not wrap: the catch-all used to answer a token
    client's POST to a wrong path with the HTML CSRF page (403) instead of 404."""
    token = api_token_create(user=owner).secret
    c = APIClient(enforce_csrf_checks=True, raise_request_exception=False)
    for method in ("post", "put", "patch", "delete"):
        response = getattr(c, method)("/api/nowhere/", "{}", content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
        error(response, 404, "not_found")
