"""The suite's layout rules, checked on the source: a test module or a conftest is never
imported (what tests share lives in ``tests/support/`` or in a room's helper module), and the
benchmarks use the suite only through ``tests/support/``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.services import REPO

TESTS = REPO / "tests"


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """Every module the file at ``path`` (or ``source`` as if it were there) imports: absolute
    names, and ``from a import b`` counts ``a.b`` too (``b`` may be a module)."""
    if source is None:
        source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package upwards
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def is_test_module_or_conftest(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "tests" and any(part == "conftest" or part.startswith("test_") for part in parts[1:])


def test_no_test_module_or_conftest_is_imported():
    offences = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in imported_modules(path)
        if is_test_module_or_conftest(module)
    ]
    assert offences == [], "import what tests share from tests/support/ (or a room's helper module):\n" + "\n".join(offences)


def test_the_benchmarks_use_the_suite_only_through_its_support():
    offences = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "bench").rglob("*.py"))
        for line, module in imported_modules(path)
        if module.split(".")[0] == "tests" and not module.startswith("tests.support")
    ]
    assert offences == [], "\n".join(offences)


def test_the_check_catches_every_way_of_writing_such_an_import():
    at = TESTS / "runtime" / "helpers_of_a_room.py"
    written = {
        "from tests.runtime.test_turn import wait_for": "tests.runtime.test_turn",
        "from tests.browser import conftest": "tests.browser.conftest",
        "import tests.gateway.conftest as c": "tests.gateway.conftest",
        "from .test_turn import x": "tests.runtime.test_turn",
        "from . import conftest": "tests.runtime.conftest",
        "from tests.support.services import REPO": None,
        "from tests.subagents.celery_helpers import children": None,
    }
    for code, expected in written.items():
        modules = [module for _, module in imported_modules(at, code)]
        caught = [module for module in modules if is_test_module_or_conftest(module)]
        assert (expected in caught) if expected else caught == [], (code, modules)


APP_PACKAGES = ("neta", "runtime", "sessions_tree", "skills_registry", "toolcatalog", "audit", "infra")


def function_level_imports(path: Path) -> list[tuple[int, bool]]:
    """Each import inside a function of the file at ``path``: its line, and whether a comment
    on its lines (or on the line above it) says why it is there."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                span = lines[child.lineno - 2 : child.end_lineno]
                found.append((child.lineno, any("#" in line for line in span)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source, filename=str(path)), False)
    return found


def test_every_function_level_import_says_why():
    """An import belongs at the top of its module; one inside a function breaks a real cycle or
    keeps start-up light, and says which on its line (docs/architecture.md)."""
    bare, total = [], 0
    for package in APP_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, explained in function_level_imports(path):
                total += 1
                if not explained:
                    bare.append(f"{path.relative_to(REPO)}:{line}")
    assert total > 0  # the walk found the app code
    assert not bare, "function-level imports without a reason: " + ", ".join(bare)
