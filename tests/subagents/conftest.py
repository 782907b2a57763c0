"""The workspace the subagent tests' children work in: a folder holding ``notes.txt``,
file sessions beside it, no sandbox (the bwrap tests set their own)."""

from __future__ import annotations

import pytest

from runtime.runs import traces
from sessions_tree.index import INDEXES


@pytest.fixture
def workspace(tmp_path, settings):
    path = tmp_path / "workspace"
    path.mkdir()
    (path / "notes.txt").write_text("hello\n")
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = path
    settings.NETA_SANDBOX = "none"
    INDEXES.clear()
    traces._stored.clear()  # each test's database starts empty: so does this process's memory of stored blobs
    return path
