"""The kernel's public surface: what other modules may call on a provider, and that they do.

Two halves. The first reads the source: no module outside a provider's own
class reaches a provider's private method (``provider._store_index(...)``,
``provider._leaf(...)``) or imports a private name of another kernel module.
The second runs the public methods that replaced those calls, on every provider.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sessions_tree import events as ev
from sessions_tree.errors import EntryNotFound
from sessions_tree.models import SessionEvent
from sessions_tree.providers.base import SessionTreeProvider
from sessions_tree.providers.file import FileProvider
from sessions_tree.providers.mysql import MysqlProvider
from tests.support.entries import assistant_message, user_message
from tests.support.services import REPO

PACKAGES = ("runtime", "neta", "toolcatalog", "skills_registry", "bench", "sessions_tree")
PROVIDER_CLASSES = (SessionTreeProvider, FileProvider, MysqlProvider)
PROVIDER_MODULES = {inspect.getsourcefile(c) for c in PROVIDER_CLASSES}


def _private_provider_methods() -> set[str]:
    names = set()
    for cls in PROVIDER_CLASSES:
        names |= {n for n in vars(cls) if n.startswith("_") and not n.startswith("__")}
    return names


def _sources():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def private_provider_calls() -> list[str]:
    """``x._name`` where ``_name`` is a provider's private method and ``x`` is not ``self``/``cls``."""
    private = _private_provider_methods()
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                receiver = node.value
                if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls", "super"):
                    continue
                if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", None) == "super":
                    continue
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: .{node.attr}")
    return found


def private_kernel_imports() -> list[str]:
    """``from sessions_tree.x import _y`` anywhere (a private name of another kernel module)."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sessions_tree"):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_nothing_reaches_a_providers_private_methods():
    assert private_provider_calls() == []


def test_no_module_imports_a_private_kernel_name():
    assert private_kernel_imports() == []


def test_the_scan_sees_a_private_call(tmp_path):
    """The scan itself works: the calls it forbids are found when written."""
    private = _private_provider_methods()
    assert {"_store_index", "_leaf", "_context_stats", "_store_lock"} <= private
    tree = ast.parse("provider._store_index(meta)\nself._leaf(meta, index)\n")
    hits = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in private and n.value.id != "self"]
    assert hits == ["_store_index"]


# --------------------------------------------------------------------------- the public methods

pytestmark_db = pytest.mark.django_db(databases="__all__")


def leaf_events(provider, session_id: str) -> list[dict]:
    rows = SessionEvent.objects.using(provider.using).filter(session__session_id=session_id, type=ev.LEAF_CHANGED)
    return [row.revision for row in rows.order_by("revision")]


def conversation(provider):
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message("first question"))
    a1 = provider.append_message(sid, assistant_message("first answer"))
    u2 = provider.append_message(sid, user_message("second question"))
    a2 = provider.append_message(sid, assistant_message("second answer"))
    return sid, u1, a1, u2, a2


@pytestmark_db
def test_index_for_and_navigation_target(provider):
    sid, u1, a1, u2, a2 = conversation(provider)
    index = provider.index_for(sid)
    assert set(index.by_id) == {u1["id"], a1["id"], u2["id"], a2["id"]}
    assert provider.navigation_target(sid, u2["id"]) == (a1["id"], "second question")
    assert provider.navigation_target(sid, u1["id"]) == (None, "first question")
    assert provider.navigation_target(sid, a1["id"]) == (a1["id"], None)
    with pytest.raises(EntryNotFound):
        provider.navigation_target(sid, "nosuchid")


@pytestmark_db
def test_navigate_moves_the_leaf_once_and_only_when_it_changes(provider):
    sid, u1, a1, u2, a2 = conversation(provider)
    revision = provider.get_session(sid).revision
    assert provider.navigate(sid, u2["id"]) == (a1["id"], "second question")
    meta = provider.get_session(sid)
    assert meta.leaf_entry_id == a1["id"] and meta.revision == revision + 1
    assert provider.navigate(sid, a1["id"]) == (a1["id"], None)  # already there: nothing written
    assert provider.get_session(sid).revision == revision + 1
    assert provider.navigate(sid, u1["id"]) == (None, "first question")
    assert provider.get_session(sid).leaf_entry_id is None
    assert provider.navigate(sid, None) == (None, None)
    assert len(leaf_events(provider, sid)) == 2
    with pytest.raises(EntryNotFound):
        provider.navigate(sid, "nosuchid")
    assert provider.get_session(sid).revision == revision + 2


@pytestmark_db
def test_context_stats_is_what_every_event_carries(provider):
    sid, *_ = conversation(provider)
    stats = provider.context_stats(sid)
    assert stats["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    assert stats["tokenEstimate"] > 0
    last = SessionEvent.objects.using(provider.using).filter(session__session_id=sid).order_by("-revision").first()
    assert json.loads(last.payload)["context"] == stats
    assert provider.get_snapshot(sid)["runtimeContext"] == stats


@pytestmark_db
def test_write_lock_is_the_stores_lock(provider):
    sid, *_ = conversation(provider)
    with provider.write_lock(sid):
        provider.append_message(sid, user_message("inside the caller's lock"))  # the lock is re-entrant
    assert provider.get_session(sid).message_count == 5


# --------------------------------------------------------------------------- the contracts keep the circles broken

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CIRCLES = [
    ("sessions_tree/snapshot.py", "from sessions_tree.providers.base import SessionTreeProvider", "kernel-providers-on-top"),
    ("toolcatalog/protocol.py", "import toolcatalog.builtins", "tool-registry-knows-no-tool"),
    ("toolcatalog/models.py", "from toolcatalog.projection import GovernanceRule", "tool-catalog-reads"),
    ("toolcatalog/projection.py", "from toolcatalog.selectors import tool_catalog", "tool-catalog-reads"),
    ("runtime/runs/backends.py", "from runtime.runs.tasks import run_agent_turn", "runs-rooms"),
    ("runtime/subagents/hosting.py", "from runtime.subagents.host import delegate_from_child", "subagents-rooms"),
]


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory):
    if not LINT_IMPORTS.exists():
        pytest.fail(f"import-linter is a test dependency; {LINT_IMPORTS} is missing")
    root = tmp_path_factory.mktemp("lint")
    for package in ("neta", "runtime", "skills_registry", "toolcatalog", "sessions_tree", "audit", "infra"):
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, env=env, timeout=120)


def test_the_contracts_hold_on_the_tree(source_copy):
    result = lint(source_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module, line, contract", CIRCLES, ids=[c[2] + ":" + c[0] for c in CIRCLES])
def test_re_closing_a_circle_fails_the_contracts(source_copy, module, line, contract):
    path = source_copy / module
    original = path.read_text(encoding="utf-8")
    path.write_text(original + f"\n{line}  # noqa: E402\n", encoding="utf-8")
    try:
        result = lint(source_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0
    contracts = tomllib.loads((source_copy / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    name = next(c["name"] for c in contracts if c["id"] == contract)
    squeezed = "".join(result.stdout.split())  # the report wraps long names
    assert "".join(name.split()) + "BROKEN" in squeezed, result.stdout
    assert "1broken" in squeezed, result.stdout
