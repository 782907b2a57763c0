"""Every ``NETA_*`` variable is read once, in ``neta/settings.py``, and documented.

A scan of the source (no import of the modules scanned):

* outside ``neta/settings.py`` and ``neta/env.py`` no code of the apps reads a
  ``NETA_*`` name from the environment (``os.environ``, ``os.getenv``) or calls the
  ``neta.env`` readers; the apps read ``django.conf.settings`` instead;
* every ``settings.NETA_*`` the apps use is defined in ``neta/settings.py`` (a
  ``getattr(settings, "NETA_X", default)`` of a name settings never defines is a
  variable nobody can set);
* every ``NETA_*`` name read anywhere (settings, tests, benchmarks) has a row in the
  README's configuration tables.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.services import REPO

APP_PACKAGES = ("neta", "runtime", "sessions_tree", "toolcatalog", "skills_registry")
SETTINGS_FILES = ("neta/settings.py", "neta/env.py")
ENV_READERS = {"env_str", "env_bool", "env_int", "env_list", "env_choice", "env_path", "_raw"}
NAME = re.compile(r"NETA_[A-Z0-9_]*[A-Z0-9]")


def python_files(root: Path, folders) -> list[Path]:
    found = []
    for folder in folders:
        found += sorted(p for p in (root / folder).rglob("*.py") if "migrations" not in p.parts)
    return found


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` / ``environ`` / ``os.getenv`` / ``getenv``."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("environ", "getenv") and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id in ("environ", "getenv")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _statement(node: ast.AST, parents) -> ast.AST:
    while not isinstance(node, ast.stmt) and node in parents:
        node = parents[node]
    return node


def _neta_strings(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("NETA_")
    }


def environment_reads(path: Path, *, helpers: bool = True) -> list[tuple[int, str]]:
    """(line, what) for every statement that reads a NETA_* name from the environment
    (with ``helpers``, also every call of a ``neta.env`` reader)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if _is_environ(node):
            statement = _statement(node, parents)
            names = _neta_strings(statement)
            if names:
                found.append((node.lineno, f"environment read of {sorted(names)}"))
        elif helpers and isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in ENV_READERS and _neta_strings(node):
                found.append((node.lineno, f"{called}() of {sorted(_neta_strings(node))}"))
    return found


def settings_reads(path: Path) -> set[str]:
    """NETA_* names ``settings.py`` reads through the strict helpers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ENV_READERS:
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def settings_defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    names.add(n.id)
    return names


def settings_used(path: Path) -> list[tuple[int, str]]:
    """(line, name) of ``settings.NETA_X`` and ``getattr(settings, "NETA_X", ...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("NETA_")
                and isinstance(node.value, ast.Name) and node.value.id in ("settings", "django_settings")):
            used.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "settings"
                and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("NETA_")):
            used.append((node.lineno, node.args[1].value))
    return used


def readme_names(readme: Path) -> set[str]:
    """NETA_* names in the first column of the tables under README's "## Configuration"."""
    text = readme.read_text(encoding="utf-8")
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `NETA_"):
            names |= set(NAME.findall(line.split("|")[1]))
    return names


# --- the checks, as functions of the tree so that they can be run on any checkout ---------------


def misplaced_reads(root: Path) -> list[str]:
    problems = []
    for path in python_files(root, APP_PACKAGES) + [root / "manage.py"]:
        rel = path.relative_to(root).as_posix()
        if rel in SETTINGS_FILES:
            continue
        problems += [f"{rel}:{line}: {what}" for line, what in environment_reads(path)]
    return problems


def undefined_settings(root: Path) -> list[str]:
    defined = settings_defined(root / "neta/settings.py")
    problems = []
    for path in python_files(root, APP_PACKAGES):
        rel = path.relative_to(root).as_posix()
        problems += [f"{rel}:{line}: settings.{name}" for line, name in settings_used(path) if name not in defined]
    return problems


def undocumented(root: Path) -> list[str]:
    documented = readme_names(root / "README.md")
    read = set(settings_reads(root / "neta/settings.py"))
    for path in python_files(root, ("tests", "bench")):
        # The env helpers' own tests read made-up names through them; only real reads count.
        for _line, what in environment_reads(path, helpers=False):
            read |= set(NAME.findall(what))
    return sorted(read - documented)


def test_no_app_code_reads_a_neta_variable_but_settings():
    assert misplaced_reads(REPO) == []


def test_every_neta_setting_the_apps_use_is_defined_in_settings():
    assert undefined_settings(REPO) == []


def test_every_neta_variable_read_is_in_the_readme_table():
    assert undocumented(REPO) == []


def test_the_readme_lists_no_variable_nothing_reads():
    read = set(settings_reads(REPO / "neta/settings.py"))
    for path in python_files(REPO, ("tests", "bench")):
        # The env helpers' own tests read made-up names through them; only real reads count.
        for _line, what in environment_reads(path, helpers=False):
            read |= set(NAME.findall(what))
    assert sorted(readme_names(REPO / "README.md") - read) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ('import os\nx = os.environ.get("NETA_X")\n', 1),
        ('import os\nx = os.environ["NETA_X"]\n', 1),
        ('import os\nx = os.getenv("NETA_X", "1") == "1"\n', 1),
        ('from os import environ\nif environ.get("NETA_X"):\n    pass\n', 1),
        ('import os\nfiles = [v for k, v in os.environ.items() if k.startswith("NETA_")]\n', 1),
        ('from neta.env import env_int\nN = env_int("NETA_N", 3)\n', 1),
        ('import os\nkey = os.environ.get(model.api_key_env)\n', 0),  # a name the operator chose
        ('from django.conf import settings\nx = settings.NETA_X\n', 0),
    ],
)
def test_the_scan_sees_every_form_of_read(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert len(environment_reads(path)) == expected


def test_variables_moved_into_settings_are_strict_too(tmp_path):
    """What used to be read leniently elsewhere (``== "1"``, any log level) now stops start-up with its name."""
    import os
    import subprocess
    import sys

    for name, value, message in [
        ("NETA_TOOLS_NO_CGROUP", "1", "NETA_TOOLS_NO_CGROUP must be 'true' or 'false'"),
        ("NETA_LOG_LEVEL", "loud", "NETA_LOG_LEVEL must be one of debug, info, warning, error, critical"),
        ("NETA_SKILL_MAX_ENTRY_BYTES", "big", "NETA_SKILL_MAX_ENTRY_BYTES must be an integer"),
    ]:
        env = {**os.environ, "NETA_VAR_DIR": str(tmp_path), name: value}
        result = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode != 0 and message in result.stderr, (name, result.stderr[-500:])
