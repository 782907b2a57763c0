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
