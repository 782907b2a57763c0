"""JSON text as JavaScript writes and reads it, and Pi's tolerant file parse.

`dumps`/`dumps_pretty` are checked against node's own JSON.stringify on
hypothesis-generated values (one node call per batch).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_tree import jsonl
from sessions_tree.jsonl import (
    UNDEFINED,
    dumps,
    dumps_pretty,
    js_number_text,
    loads,
    parse_session_text,
)
from tests.support.services import require

# --------------------------------------------------------------------------- node

# Values travel to node as JSON written by Python's stdlib (exact for floats,
# digits for big ints, \\u escapes for surrogates); non-finite floats as markers.
_NODE_STRINGIFY = r"""
const input = require("fs").readFileSync(0, "utf8");
const values = JSON.parse(input, (k, v) =>
  v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && "$nonfinite" in v
    ? Number(v.$nonfinite) : v);
process.stdout.write(JSON.stringify(values.map((v) => [JSON.stringify(v), JSON.stringify(v, null, 2)])));
"""


def _transport(value):
    if isinstance(value, float) and not math.isfinite(value):
        return {"$nonfinite": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        return {k: _transport(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_transport(v) for v in value]
    return value


def node_stringify(values: list) -> list[tuple[str, str]]:
    require(shutil.which("node") is not None, "node is not installed")
    payload = json.dumps([_transport(v) for v in values], ensure_ascii=True)
    done = subprocess.run(
        ["node", "-e", _NODE_STRINGIFY], input=payload.encode(), capture_output=True, check=True
    )
    return [tuple(pair) for pair in json.loads(done.stdout)]


# --------------------------------------------------------------------------- strategies

_awkward_floats = st.sampled_from(
    [0.0, -0.0, 5.0, 0.000009, 1e-7, 1e-6, 9.99e-7, 1e21, 1e20, 9.999999999999999e20, 1e16, 1.5e16, 0.1 + 0.2,
     123.456, 1e-300, 5e-324, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2, -1e-5, 100.0, 1e300,
     float("nan"), float("inf"), float("-inf")]
)
_ints = st.one_of(
    st.integers(-(2**53), 2**53),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**53 + 1, 2**63, 2**64 + 5, -(2**63) - 1, 10**30, 10**400]),
)
_chars = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
_text = st.one_of(
    st.text(_chars, max_size=12),
    st.sampled_from(["\ud800", "a\udc00b", "\ud83d\ude00", "\ud83d", "😀", "\u2028\u2029", "\x7f", "\x00\x1f", '"\\/']),
)
_keys = st.one_of(
    st.text(_chars, max_size=6),
    st.sampled_from(["0", "1", "2", "10", "01", "-1", "1.5", "4294967294", "4294967295", "99999999999", "__proto__", "a"]),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), _ints, st.floats(), _awkward_floats, _text),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(_keys, children, max_size=6),
    ),
    max_leaves=25,
)


# --------------------------------------------------------------------------- dumps


EDGE_VALUES = [
    5.0, -0.0, 0.000009, 1e-7, 1e21, 1e16, 123456789012345680000.0, 2**60, 2**53 + 1, 10**400,
    float("nan"), float("inf"), {"b": 1, "2": 2, "10": 3, "1": 4, "01": 5, "4294967295": 6, "4294967294": 7},
    "\ud800", "\ud83d\ude00", "x\udfff\ud800", "é😀中\u2028", "\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f\"\\/",
    [], {}, [[], {}], {"a": [1, {"b": []}]}, {"\ud800k": 1, "3": "\udc00"}, {"cost": {"input": 0.000009, "output": 0.00015, "total": 1e-7}},
]


def test_dumps_matches_node_on_edge_values():
    expected = node_stringify(EDGE_VALUES)
    for value, (compact, pretty) in zip(EDGE_VALUES, expected, strict=True):
        assert dumps(value) == compact, value
        assert dumps_pretty(value) == pretty + "\n", value


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(json_values, min_size=20, max_size=40))
def test_dumps_matches_node_json_stringify(values):
    expected = node_stringify(values)
    for value, (compact, pretty) in zip(values, expected, strict=True):
        assert dumps(value) == compact
        assert dumps_pretty(value) == pretty + "\n"


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fast_and_iterative_encoders_agree(value):
    assert jsonl._encode_iterative(value, indent=False) == dumps(value)
    assert jsonl._encode_iterative(value, indent=True) + "\n" == dumps_pretty(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_text_round_trips(value):
    text = js_number_text(value)
    assert float(text) == value
    assert not text.endswith(".0") and text != "-0"


def test_js_number_text_table():
    cases = {5.0: "5", -0.0: "0", 0.000009: "0.000009", 1e-7: "1e-7", 1e21: "1e+21", 1e16: "10000000000000000",
             -1.5e-7: "-1.5e-7", 1.25e22: "1.25e+22", 0.1: "0.1", 123.0: "123", 1e-6: "0.000001"}
    for value, text in cases.items():
        assert js_number_text(value) == text


def test_dumps_deep_nesting_uses_iterative_encoder():
    value: list = []
    cur = value
    for _ in range(5000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    assert dumps(value) == "[" * 5000 + "[]" + "]" * 5000
    assert dumps_pretty({"a": [[]]}) == '{\n  "a": [\n    []\n  ]\n}\n'


def test_dumps_does_not_copy_or_change_input():
    value = {"b": 1, "2": [5.0, "\ud800"], "x": {"y": 1e-7}}
    before = repr(value)
    dumps(value)
    assert repr(value) == before


def test_dumps_rejects_what_json_cannot_hold():
    with pytest.raises(TypeError, match="keys must be strings"):
        dumps({1: "a"})
    with pytest.raises(TypeError, match="keys must be strings"):
        dumps({"\ud800": {1: "a"}})
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"a": object()})
    with pytest.raises(TypeError):
        dumps(UNDEFINED)


def test_dumps_undefined_is_left_out_like_javascript():
    assert dumps({"a": UNDEFINED, "b": 1}) == '{"b":1}'
    assert dumps([UNDEFINED, 1]) == "[null,1]"


def test_dumps_accepts_subclasses_and_tuples():
    class Text(str):
        pass

    assert dumps({"a": (1, Text("x"), True)}) == '{"a":[1,"x",true]}'


# --------------------------------------------------------------------------- loads


def test_loads_falls_back_for_what_javascript_accepts():
    assert loads('"\\ud800"') == "\ud800"
    assert loads("1e400") == math.inf
    assert loads(b'{"a":[1,2]}') == {"a": [1, 2]}
    assert loads("18446744073709551616") == 18446744073709551616  # JS: a double, same value


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "{'a':1}", "[1,]", '"\x01"', "\ufeff{}", "01", ""])
def test_loads_rejects_what_json_parse_rejects(text):
    with pytest.raises(ValueError):
        loads(text)


def test_loads_duplicate_keys_keep_first_position_last_value():
    assert list(loads('{"a":1,"b":2,"a":3}').items()) == [("a", 3), ("b", 2)]


# --------------------------------------------------------------------------- parse_session_text

HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}'


def _entry(i: str, parent: str | None) -> str:
    return json.dumps(
        {"type": "message", "id": i, "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        separators=(",", ":"),
    )


def test_parse_keeps_raw_lines_and_line_numbers():
    text = "\ufeff\n  \n" + HEADER + "\r\n" + _entry("a", None) + "\r\n\n" + _entry("b", "a") + "  \n"
    parsed = parse_session_text(text)
    assert parsed.header["id"] == "s1"
    assert parsed.header_line == HEADER
    assert [e["id"] for e in parsed.entries] == ["a", "b"]
    # "\r" before "\n" is not part of the raw line; the file's trailing blanks are trimmed.
    assert parsed.raw_lines == [_entry("a", None), _entry("b", "a")]
    assert parsed.line_numbers == [4, 6]
    assert parsed.positions == [1, 2]
    assert parsed.diagnostics == []
    assert parsed.file_version == 3


def test_parse_skips_and_reports_damage():
    text = "\n".join([HEADER, _entry("a", None), '{"type":"message","id":"bad"', "   ", _entry("b", "a"), '{"torn":'])
    parsed = parse_session_text(text)
    assert [e["id"] for e in parsed.entries] == ["a", "b"]
    kinds = [(d.line, d.kind) for d in parsed.diagnostics]
    assert kinds == [(3, "malformed"), (6, "torn_tail")]
    assert parsed.skipped_lines == 2
    # A malformed last line that *is* terminated is not a torn tail.
    parsed = parse_session_text(text + "\n")
    assert [d.kind for d in parsed.diagnostics] == ["malformed", "malformed"]


def test_parse_header_rules():
    # A garbage first line followed by a valid header is accepted (first *parsed* value).
    parsed = parse_session_text("garbage\n" + HEADER + "\n" + _entry("a", None))
    assert parsed.header is not None and parsed.entries[0]["id"] == "a"
    # First parsed value not a header: no header, the reason is given.
    parsed = parse_session_text(_entry("a", None) + "\n" + HEADER)
    assert parsed.header is None and "not a session header" in parsed.header_error
    parsed = parse_session_text('{"type":"session","id":5}\n' + _entry("a", None))
    assert parsed.header is None and "string id" in parsed.header_error
    assert parsed.file_version == 1
    parsed = parse_session_text("42\n" + HEADER)
    assert parsed.header is None and "not a session header object" in parsed.header_error
    assert parse_session_text(" \n\t ").header_error == "the file is empty"
    assert parse_session_text("nope\n{").header_error == "no line of the file is valid JSON"


def test_parse_drops_extra_headers_and_non_objects():
    text = "\n".join([HEADER, _entry("a", None), HEADER.replace("s1", "s2"), "[1,2]", _entry("b", "a")])
    parsed = parse_session_text(text)
    assert parsed.header["id"] == "s1"
    assert [e["id"] for e in parsed.entries] == ["a", "b"]
    assert parsed.positions == [1, 4]  # Pi's index among parsed values (header 0)
    assert [d.kind for d in parsed.diagnostics] == ["extra_header", "not_an_object"]


def test_parse_missing_version_is_one():
    parsed = parse_session_text('{"type":"session","id":"x","timestamp":"t","cwd":"/"}')
    assert parsed.file_version == 1 and parsed.entries == []


def test_js_trim_matches_javascript_whitespace():
    assert jsonl.js_trim("\ufeff\u3000 x \u2028\u00a0") == "x"
    assert jsonl.js_trim("\x1cx\x85") == "\x1cx\x85"  # Python's isspace set is not JavaScript's
