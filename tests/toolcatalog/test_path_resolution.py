"""The confinement resolver agrees with the kernel's view (os.path.realpath) on random paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcatalog.paths import PathRefused, resolve_path
from toolcatalog.protocol import ToolContext

SEGMENTS = ["..", ".", "", "a", "b", "f.txt", "missing", "in_link", "out_link", "up_link", "loop", "abs_in",
            "c", "abs_out"]


def make_tree(base: Path) -> Path:
    root = base / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "a" / "f.txt").write_text("x")
    (root / "a" / "b" / "f.txt").write_text("y")
    (base / "outside" / "a").mkdir(parents=True)
    (root / "in_link").symlink_to("a/b")
    (root / "a" / "in_link").symlink_to("../c")
    (root / "out_link").symlink_to("../outside")
    (root / "a" / "up_link").symlink_to("../..")
    (root / "loop").symlink_to("loop")
    (root / "abs_in").symlink_to(root / "a")
    (root / "abs_out").symlink_to(base / "outside")
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("tree"))  # resolving never changes it


@settings(max_examples=500, deadline=None)
@given(segments=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=8), from_sub=st.booleans())
def test_resolver_matches_realpath(root, segments, from_sub):
    cwd = root / "a" if from_sub else root
    ctx = ToolContext(roots=(root,), cwd=cwd, sandbox="none")
    raw = "/".join(segments)
    if raw.strip() == "":
        return
    expected = os.path.realpath(os.path.join(cwd, raw))
    inside = expected == str(root) or expected.startswith(str(root) + "/")
    try:
        wp = resolve_path(ctx, raw)
    except PathRefused as exc:
        message = str(exc)
        if "symbolic links" in message or "is not a directory" in message or "ends with '/'" in message:
            return  # loops, files used as directories, trailing slashes: the kernel would fail too
        assert "resolves outside the workspace roots" in message, message
        assert not inside, (raw, expected)
        return
    assert str(wp.real) == expected, raw
    assert inside
