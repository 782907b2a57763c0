"""Truncation with Pi's limits: whole lines, character boundaries, honest counts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolcatalog.truncation import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_head,
    truncate_line,
    truncate_tail,
)


def test_limits_are_pis():
    assert DEFAULT_MAX_LINES == 2000
    assert DEFAULT_MAX_BYTES == 50 * 1024
    assert format_size(500) == "500B"
    assert format_size(51200) == "50.0KB"
    assert format_size(3 * 1024 * 1024) == "3.0MB"


def test_head_by_lines():
    text = "\n".join(f"line {i}" for i in range(1, 3001))
    t = truncate_head(text)
    assert t.truncated and t.truncated_by == "lines"
    assert t.output_lines == 2000 and t.total_lines == 3000
    assert t.content.splitlines()[-1] == "line 2000"


def test_head_by_bytes_keeps_whole_lines():
    line = "界" * 1000  # 3000 bytes
    t = truncate_head("\n".join([line] * 30))
    assert t.truncated_by == "bytes"
    assert t.output_lines == 17  # 17 * 3001 - 1 <= 51200 < 18 * 3001 - 1
    assert all(part == line for part in t.content.split("\n"))


def test_head_first_line_too_big():
    t = truncate_head("x" * (DEFAULT_MAX_BYTES + 1) + "\nshort")
    assert t.first_line_exceeds_limit and t.content == "" and t.output_lines == 0


def test_tail_partial_last_line_cuts_on_character_boundary():
    line = "😀" * 20000  # 80000 bytes, one line
    t = truncate_tail(line)
    assert t.last_line_partial and t.truncated_by == "bytes"
    assert t.output_bytes <= DEFAULT_MAX_BYTES
    assert set(t.content) == {"😀"}  # no broken character at the cut


def test_tail_by_lines():
    text = "\n".join(str(i) for i in range(5000))
    t = truncate_tail(text)
    assert t.truncated_by == "lines" and t.output_lines == 2000
    assert t.content.split("\n")[0] == "3000"


def test_line_truncation_marks_the_cut():
    assert truncate_line("a" * 10, 5) == ("aaaaa... [truncated]", True)
    assert truncate_line("short", 5) == ("short", False)


text_st = st.text(alphabet=st.sampled_from(["a", "\n", "界", "😀", "é", " "]), max_size=3000)


@settings(max_examples=200, deadline=None)
@given(text_st, st.integers(1, 50), st.integers(1, 400))
def test_head_properties(text, max_lines, max_bytes):
    t = truncate_head(text, max_lines=max_lines, max_bytes=max_bytes)
    assert text.startswith(t.content)
    assert len(t.content.encode()) <= max_bytes or not t.truncated
    assert t.output_lines <= max_lines
    if t.truncated and t.content:
        assert text[len(t.content)] == "\n"  # cut between lines
    if not t.truncated:
        assert t.content == text


@settings(max_examples=200, deadline=None)
@given(text_st, st.integers(1, 50), st.integers(4, 400))
def test_tail_properties(text, max_lines, max_bytes):
    t = truncate_tail(text, max_lines=max_lines, max_bytes=max_bytes)
    assert text.endswith(t.content)
    assert len(t.content.encode()) <= max_bytes or not t.truncated
    t.content.encode("utf-8")  # valid: never a split character
    if t.truncated and not t.last_line_partial and t.content != text:
        assert text[len(text) - len(t.content) - 1] == "\n"
