"""The OpenAPI schema: valid without warnings, served with a docs page, and
fuzzed (schemathesis, bounded examples) without a single 5xx — with what the
schema does not describe as well: JSON bodies nested far too deep and lone
surrogates in every string."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import schemathesis
import yaml
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from runtime.api.tokens import api_token_create
from runtime.api.views.schema import SchemaApi
from runtime.models import AgentRun
from tests.support.builders import build_tree, default_agent
from tests.support.services import REPO


def test_schema_validates_without_warnings():
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower() and "error" not in result.stderr.lower(), result.stderr


def test_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/sessions/{session_id}/switch-leaf/" in paths and "/api/sessions/import/" in paths
    assert schema.json()["components"]["securitySchemes"]["tokenAuth"]["name"] == "Authorization"
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    # The docs page's assets are served locally (no CDN).
    assert b"cdn.jsdelivr" not in docs.content


def test_the_schema_answers_in_each_format_and_language_asked_for(client):
    """Built once per language, version and format: each request still gets its own."""
    for _ in range(2):
        as_json = client.get("/api/schema/?format=json")
        assert as_json["Content-Type"].startswith("application/vnd.oai.openapi+json")
        assert as_json.json()["info"]["title"] == "Neta API"
        as_yaml = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
        assert as_yaml["Content-Type"].startswith("application/vnd.oai.openapi")
        assert yaml.safe_load(as_yaml.content) == as_json.json()
        assert as_yaml["Content-Disposition"] == 'inline; filename="Neta API.yaml"'
    # Strings the schema translates follow ``?lang=``, and English comes back after it.
    english = client.get("/api/schema/?format=json").json()
    chinese = client.get("/api/schema/?format=json&lang=zh-hans").json()
    assert chinese["paths"].keys() == english["paths"].keys() and chinese != english
    assert client.get("/api/schema/?format=json").json() == english
    # What a caller may vary keeps the kept renderings bounded.
    for n in range(40):
        assert client.get(f"/api/schema/?format=json&version=v{n}&lang=x{n}").status_code == 200
    assert len(SchemaApi._rendered) <= SchemaApi.KEPT


@pytest.fixture
def api_schema(db):
    # Like Django's test client: requests must not close the test's DB connection.
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_world(db, owner, sessions_dir, tmp_path, settings):
    """A real session, run and token, so fuzzed requests reach real code paths."""
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    agent = default_agent()
    tree = build_tree(owner, agent)
    run = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, prompt="p", status="completed")
    token = api_token_create(user=owner).secret
    return {"session_id": tree.session_id, "run_id": str(run.run_id), "token": token, "tree": tree}


def operations(schema) -> list:
    return [result.ok() for result in schema.get_all_operations()]


FUZZ_SETTINGS = hypothesis_settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]


def with_surrogates(value, surrogate: str, where: str):
    """``value`` with a lone surrogate in every string (keys too)."""

    def lace(text: str) -> str:
        return {"whole": surrogate, "prefix": surrogate + text, "suffix": text + surrogate}[where]

    if isinstance(value, str):
        return lace(value)
    if isinstance(value, list):
        return [with_surrogates(item, surrogate, where) for item in value]
    if isinstance(value, dict):
        return {lace(k) if isinstance(k, str) else k: with_surrogates(v, surrogate, where) for k, v in value.items()}
    return value


def deeply_nested(body, depth: int, inside: bool) -> bytes:
    """The body's JSON text nested ``depth`` levels deep: wrapped in arrays, or
    (``inside``) one of its fields replaced by a deep array. Raw bytes: the
    client's own encoder would recurse too."""
    if inside and isinstance(body, dict) and body:
        key = next(iter(body))
        head = json.dumps({k: v for k, v in body.items() if k != key})[:-1]
        field = json.dumps(key) + ": " + "[" * depth + "]" * depth
        return (head + (", " if len(head) > 1 else "") + field + "}").encode()
    return ("[" * depth + json.dumps(body) + "]" * depth).encode()


TWISTS = st.one_of(
    st.just(("as generated",)),
    st.tuples(st.just("surrogates"), st.sampled_from(SURROGATES), st.sampled_from(["whole", "prefix", "suffix"])),
    st.tuples(st.just("deep"), st.sampled_from([65, 1025, 10_000]), st.booleans()),
)


def test_no_input_makes_the_api_fail(api_schema, fuzz_world):
    """Every operation, a bounded number of generated requests each: never a 5xx.

    Each JSON body is sent as generated, with a lone surrogate in every string,
    or nested past the parser's bound (wrapped, or inside one field). A deep
    body is never accepted (no 2xx).

    (Schemathesis' pytest plugin does not run under pytest 9, so the operations
    are driven directly through hypothesis.)
    """
    headers = {"Authorization": f"Token {fuzz_world['token']}"}
    checked = []
    twisted = {"surrogates": 0, "deep": 0}
    for operation in operations(api_schema):

        @given(case=operation.as_strategy(), twist=TWISTS)
        @FUZZ_SETTINGS
        def fuzz(case, twist):
            params = case.path_parameters or {}
            if "session_id" in params and case.method.upper() != "DELETE":
                params["session_id"] = fuzz_world["session_id"]
            if "run_id" in params:
                params["run_id"] = fuzz_world["run_id"]
            if "name" in params:
                params["name"] = "scripted-demo" if case.path.startswith("/api/models/") else "default"
            is_json = (case.media_type or "").startswith("application/json") and not isinstance(case.body, bytes)
            if is_json and twist[0] == "surrogates":
                # json.dumps escapes them (\ud800): valid JSON text, as a JavaScript client sends it.
                case.body = json.dumps(with_surrogates(case.body, twist[1], twist[2])).encode()
                twisted["surrogates"] += 1
            elif is_json and twist[0] == "deep":
                case.body = deeply_nested(case.body, twist[1], twist[2])
                twisted["deep"] += 1
            response = case.call_and_validate(headers=headers, checks=[not_a_server_error])
            if is_json and twist[0] == "deep":
                assert not 200 <= response.status_code < 300, (case.method, case.path, response.status_code)

        fuzz()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert len(checked) >= 25, checked
    assert twisted["surrogates"] >= 10 and twisted["deep"] >= 10, twisted
