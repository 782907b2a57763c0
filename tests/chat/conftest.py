"""Fixtures for the chat page's Python-side tests: the same three provider setups as the
kernel's contract suite."""

from __future__ import annotations

from tests.support.providers import provider  # noqa: F401 - the fixture
